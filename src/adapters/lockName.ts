/**
 * The fleet lock's container name, in a module of its own: FleetLock
 * (./fleetState.ts) creates it and the switch-back offer (./switchAsks.ts)
 * reads its holder, and fleetState.ts imports switchAsks.ts (removeFleetState),
 * so neither can own it without an import cycle.
 */
export function lockContainerName(service: string): string {
  return `fleetroll-lock-${service}`;
}
