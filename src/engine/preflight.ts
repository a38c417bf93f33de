/**
 * Before a rollout touches anything: every host answers, the image is on
 * every host (copied or pulled where missing), every network exists, and
 * every nginx has a config that passes `nginx -t`. Any problem fails the
 * rollout with nothing changed, listing all of them.
 */
import type { Fleet } from '../config/load.js';
import { bindSources, namedVolumes } from '../core/container.js';
import { fleetHealthcheckTest, readinessKind } from '../config/probes.js';
import { forceRoute } from '../core/upstream.js';
import { RolloutFailedError } from '../errors.js';
import { LABELS, type Router, type Runtime } from '../ports.js';
import type { HostWork } from './hostWork.js';
import { copyImage, pullImage, type ImageSources } from './images.js';
import type { LoadBalancer } from './traffic.js';

export async function preflight(fleet: Fleet, balancers: readonly LoadBalancer[], work: HostWork, s: ImageSources & { copyImages: boolean }): Promise<void> {
  // Docker's healthcheck as readiness: the fleet's own, or else the image must bring one.
  const readiness = fleet.probes?.readiness;
  const needsImageHealthcheck = readiness !== undefined && readinessKind(readiness) === 'healthcheck' && fleetHealthcheckTest(fleet) === undefined;
  // Hosts are checked (and sent the image) in parallel, so a slow link to
  // one host does not hold up the others; problems are listed in host order.
  const perHost = await Promise.all(
    [...s.runtimes].map(([name, rt]: [string, Runtime]) =>
      work.run(name, async () => {
        const found: string[] = [];
        try {
          await rt.ping();
          const present =
            (await rt.imageExists(fleet.image)) ||
            (s.copyImages && (await copyImage(fleet.image, name, rt, s))) ||
            (await pullImage(fleet.image, name, rt, s.emit));
          if (!present) found.push(`image ${fleet.image} is not present on host ${name}`);
          else if (needsImageHealthcheck) {
            const image = await rt.imageInfo(fleet.image);
            if (image && !image.healthcheck) {
              found.push(
                `probes.readiness is { healthcheck: true }, but image ${fleet.image} on host ${name} defines no HEALTHCHECK and the fleet sets no healthcheck: add a HEALTHCHECK to the image, set healthcheck: { test: [...] } in the fleet file, or choose another readiness (path, tcp or exec)`,
              );
            }
          }
          const network = fleet.hosts.find((h) => h.name === name)?.network;
          if (network && !(await rt.networkExists(network))) found.push(`network ${network} does not exist on host ${name} (docker network create ${network})`);
          for (const n of fleet.container?.networks ?? []) {
            if (n.name !== network && !(await rt.networkExists(n.name))) found.push(`network ${n.name} (networks) does not exist on host ${name} (docker network create ${n.name})`);
          }
          // Mount sources: a missing bind source fails here, on its host, before anything is touched.
          const binds = [...bindSources(fleet.container), ...Object.values(fleet.secretSources ?? {})];
          if (present && binds.length > 0 && rt.missingBindSources) {
            for (const p of await rt.missingBindSources(fleet.image, binds)) found.push(`bind source ${p} does not exist on host ${name} (create it there, or fix volumes / secretFiles)`);
          }
          if (found.length === 0) for (const v of namedVolumes(fleet.container)) await rt.ensureVolume?.(v, { [LABELS.volume]: fleet.service });
        } catch (err) {
          found.push((err as Error).message);
        }
        return found;
      }),
    ),
  );
  const problems = perHost.flat();
  for (const { router: r } of balancers) {
    try {
      await r.check();
    } catch (err) {
      const message = (err as Error).message;
      // nginx.conf proxies to canary.force's variable before any deploy with force set wrote its map.
      const route = /unknown "(fleetroll_\w+_route)" variable/.exec(message)?.[1];
      problems.push(
        route === undefined
          ? message
          : `${message}\n  ($${route} is defined by the upstream file a deploy with strategy.canary.force writes: put proxy_pass back to http://<upstream> for this deploy, then proxy to http://$${route} once it has run)`,
      );
    }
  }
  if (problems.length === 0) for (const lb of balancers) await forceNotice(fleet, lb, s.emit);
  if (problems.length > 0) {
    throw new RolloutFailedError(`preflight failed, nothing was changed:\n  ${problems.join('\n  ')}`, 'fix the problems above and run the deploy again', {}, 'preflight');
  }
}

/**
 * canary.force works only where nginx.conf proxies to its variable. nginx
 * cannot say so by failing: a config that proxies to the main upstream is
 * valid, and testers would silently get the weighted split. So read what
 * nginx loads (`nginx -T`) and say it, without stopping the deploy (the
 * first deploy with force set is what writes the map nginx.conf may then use).
 */
async function forceNotice(fleet: Fleet, lb: LoadBalancer, emit: (e: { type: 'info'; message: string }) => void): Promise<void> {
  const force = fleet.strategy.type === 'Canary' ? fleet.strategy.canary.force : undefined;
  const router: Router = lb.router;
  if (force === undefined || !router.config) return;
  const text = await router.config().catch(() => undefined);
  if (text === undefined) return;
  const { variable } = forceRoute(lb.upstream);
  // `$` and the rest of the variable are literal here: letters, digits and "_" after the "$".
  if (new RegExp(`\\bproxy_pass\\s+https?://\\${variable}\\s*;`).test(text)) return;
  const [kind, name] = force.split(':') as [string, string];
  emit({
    type: 'info',
    message: `warning: ${router.name}: canary.force is set, but no proxy_pass in its config uses ${variable}, so the ${kind} ${name} is ignored (testers get the weighted split); once this deploy has written the map, change proxy_pass http://${lb.upstream} to proxy_pass http://${variable} and reload nginx`,
  });
}
