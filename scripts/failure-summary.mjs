// A second test reporter beside the TAP one: it stays silent while the suite
// runs and, at the end, prints the slowest tests and every failed test again (file, name path,
// the error's first lines), so that a failure is the last thing in a long
// CI log rather than somewhere in the middle of 2,000 passing tests.
export default async function* failureSummary(source) {
  const failures = [];
  /** The slowest passing tests: the ones closest to their timeouts on a busy machine. */
  const slowest = [];
  // Files run in parallel and their events interleave: one name stack per file.
  const stacks = new Map();
  const stackOf = (file) => stacks.get(file) ?? stacks.set(file, []).get(file);
  /**
   * Per tier (test/unit, test/cli, test/local, test/integration): its files
   * and the summed time of its top-level tests. Files of every tier run side
   * by side, so each tier's share of the summed time is what it costs the
   * run (the runner reports a file's events when the file ends, so there is
   * no honest wall-clock span per tier to give).
   */
  const tiers = new Map();
  const tierOf = (file) => {
    const name = /\/test\/([^/]+)\//.exec(file ?? '')?.[1] ?? '?';
    return tiers.get(name) ?? tiers.set(name, { files: new Set(), ms: 0 }).get(name);
  };
  const seen = (event) => {
    const t = tierOf(event.data.file);
    t.files.add(event.data.file);
    if (event.type !== 'test:start' && event.data.nesting === 0) t.ms += event.data.details?.duration_ms ?? 0;
  };
  for await (const event of source) {
    if (event.type === 'test:start' || event.type === 'test:pass' || event.type === 'test:fail') seen(event);
    if (event.type === 'test:start') {
      const stack = stackOf(event.data.file);
      stack[event.data.nesting] = event.data.name;
      stack.length = event.data.nesting + 1;
    } else if (event.type === 'test:pass' && event.data.details?.type !== 'suite') {
      const ms = event.data.details?.duration_ms ?? 0;
      slowest.push({
        ms,
        name: `${event.data.file?.replace(/^.*\/test\//, 'test/') ?? '?'} › ${[...stackOf(event.data.file).slice(0, event.data.nesting), event.data.name].filter(Boolean).join(' › ')}`,
      });
      slowest.sort((a, b) => b.ms - a.ms);
      slowest.length = Math.min(slowest.length, 10);
    } else if (event.type === 'test:fail') {
      const d = event.data;
      const err = d.details?.error;
      // A suite fails when a test in it does; name only the test itself.
      if (err?.failureType === 'subtestsFailed') continue;
      const path = [...stackOf(d.file).slice(0, d.nesting), d.name].filter(Boolean).join(' › ');
      const cause = err?.cause ?? err;
      const text = String(cause?.stack ?? cause?.message ?? cause ?? 'failed')
        .split('\n')
        .slice(0, 12)
        .join('\n      ');
      failures.push(`  ✗ ${d.file ?? '?'}\n    ${path} (${Math.round(d.details?.duration_ms ?? 0)} ms)\n      ${text}`);
    }
  }
  const total = [...tiers.values()].reduce((sum, t) => sum + t.ms, 0) || 1;
  yield `\n# tiers (files, summed time of their top-level tests, share of the whole):\n${[...tiers.entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(
      ([name, t]) =>
        `#   test/${name.padEnd(12)} ${String(t.files.size).padStart(3)} files ${(t.ms / 1000).toFixed(1).padStart(8)} s ${((100 * t.ms) / total).toFixed(1).padStart(5)}%`,
    )
    .join('\n')}\n`;
  yield `\n# slowest tests:\n${slowest.map((t) => `#   ${(t.ms / 1000).toFixed(1).padStart(6)} s  ${t.name}`).join('\n')}\n`;
  yield failures.length === 0 ? '\n# failure summary: no test failed\n' : `\n# failure summary: ${failures.length} test(s) failed\n${failures.join('\n')}\n`;
}
