#!/usr/bin/env node
import { run } from './program.js';

// `fleetroll ... | head` closes stdout early: that is the reader's choice, not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw err;
});

process.exitCode = await run(process.argv.slice(2));

// A command that has finished ends, even if something it used left a handle
// open (an event stream, a library's socket): a deploy that is done must not
// hold the user's terminal or a CI job. The process normally ends on its own
// before this timer (unref'd) fires; output is already written (stdout and
// stderr are synchronous for files and pipes on Linux). With
// FLEETROLL_LEAK_CHECK set (the tests set it) the leak is named on stderr.
const OPEN_AFTER_END_MS = 2000;
setTimeout(() => {
  if (process.env.FLEETROLL_LEAK_CHECK) {
    const open = process.getActiveResourcesInfo().filter((r) => r !== 'Timeout' && r !== 'TTYWrap');
    process.stderr.write(`fleetroll: leak check: still open ${OPEN_AFTER_END_MS} ms after the command ended: ${open.join(', ') || '(timers only)'}\n`);
  }
  process.exit();
}, OPEN_AFTER_END_MS).unref();
