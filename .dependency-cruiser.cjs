/**
 * fleetroll's layering, checked by `npm run lint:deps` (the first step of `npm test`):
 *
 *   core      pure rules (strategy, plan, waves, upstream text): no I/O, no outer layer
 *   engine    the rollout, talking to the outside only through src/ports.ts
 *   adapters  Docker, nginx, HTTP, ssh: implement the ports, know nothing of the engine
 *   wiring    src/wiring.ts: the default adapter for each port; only the entry points use it
 *   cli       the command line on the default wiring, and prints; nothing else imports it
 *   index     src/index.ts: the package's public API (the library); nothing inside imports it
 *
 * Type-only imports count too (tsPreCompilationDeps): the engine should not even
 * name an adapter's types. Violations that existed when a rule was introduced are
 * listed in .dependency-cruiser-known-violations.json (`--ignore-known`); regenerate
 * it with `npm run lint:deps:baseline` only when a violation is removed.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle makes two modules one: neither can change, load or be tested without the other.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'core-no-node-builtins',
      severity: 'error',
      comment: 'src/core is pure: no node: module (file system, network, processes, clock sources).',
      from: { path: '^src/core/' },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'core-no-impure-packages',
      severity: 'error',
      comment: 'src/core is pure: no library that talks to Docker, ssh, processes, logs or renders.',
      from: { path: '^src/core/' },
      to: { path: 'node_modules/(dockerode|docker-modem|execa|pino|ssh2|tar-stream|p-retry|vega|vega-lite|commander|@commander-js/extra-typings)/' },
    },
    {
      name: 'core-no-outer-layers',
      severity: 'error',
      comment: 'src/core imports nothing from the layers built on it (adapters, engine, cli, experiment, config).',
      from: { path: '^src/core/' },
      to: { path: '^src/(adapters|engine|cli|experiment|config)/' },
    },
    {
      name: 'engine-not-adapters',
      severity: 'error',
      comment: 'src/engine talks to the outside through the ports in src/ports.ts, never to an adapter directly.',
      from: { path: '^src/engine/' },
      to: { path: '^src/adapters/' },
    },
    {
      name: 'adapters-not-engine-or-cli',
      severity: 'error',
      comment: 'src/adapters implement ports; they do not call back into the engine or the CLI.',
      from: { path: '^src/adapters/' },
      to: { path: '^src/(engine|cli)/' },
    },
    {
      name: 'only-cli-imports-cli',
      severity: 'error',
      comment: 'src/cli wires and prints: nothing but the CLI itself (and bin) may depend on it.',
      from: { pathNot: '^(src/cli|bin)/' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'wiring-only-from-entry-points',
      severity: 'error',
      comment:
        'src/wiring.ts picks the adapter for each port: only the entry points (the CLI, the library index) choose; the engine and the adapters are handed their ports.',
      from: { pathNot: '^src/(cli/|index\\.ts$)' },
      to: { path: '^src/wiring\\.ts$' },
    },
    {
      name: 'nothing-imports-the-index',
      severity: 'error',
      comment:
        'src/index.ts is the package seen from outside: a module inside that imported it would depend on everything it re-exports (and close a cycle through it).',
      from: {},
      to: { path: '^src/index\\.ts$' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.d.ts'],
    },
    reporterOptions: {
      text: { highlightFocused: true },
    },
  },
};
