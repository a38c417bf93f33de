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
  for await (const event of source) {
    if (event.type === 'test:start') {
      const stack = stackOf(event.data.file);
      stack[event.data.nesting] = event.data.name;
      stack.length = event.data.nesting + 1;
    } else if (event.type === 'test:pass' && event.data.details?.type !== 'suite') {
      const ms = event.data.details?.duration_ms ?? 0;
      slowest.push({ ms, name: `${event.data.file?.replace(/^.*\/test\//, 'test/') ?? '?'} › ${[...stackOf(event.data.file).slice(0, event.data.nesting), event.data.name].filter(Boolean).join(' › ')}` });
      slowest.sort((a, b) => b.ms - a.ms);
      slowest.length = Math.min(slowest.length, 10);
    } else if (event.type === 'test:fail') {
      const d = event.data;
      const err = d.details?.error;
      // A suite fails when a test in it does; name only the test itself.
      if (err?.failureType === 'subtestsFailed') continue;
      const path = [...stackOf(d.file).slice(0, d.nesting), d.name].filter(Boolean).join(' › ');
      const cause = err?.cause ?? err;
      const text = String(cause?.stack ?? cause?.message ?? cause ?? 'failed').split('\n').slice(0, 12).join('\n      ');
      failures.push(`  ✗ ${d.file ?? '?'}\n    ${path} (${Math.round(d.details?.duration_ms ?? 0)} ms)\n      ${text}`);
    }
  }
  yield `\n# slowest tests:\n${slowest.map((t) => `#   ${(t.ms / 1000).toFixed(1).padStart(6)} s  ${t.name}`).join('\n')}\n`;
  yield failures.length === 0 ? '\n# failure summary: no test failed\n' : `\n# failure summary: ${failures.length} test(s) failed\n${failures.join('\n')}\n`;
}
