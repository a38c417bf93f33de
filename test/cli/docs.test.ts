/**
 * The docs cannot drift: every example in README.md and docs/*.md marked
 * `runnable` runs against the built CLI and must exit and print as the page
 * says, and every relative link and #anchor in those files must lead
 * somewhere. The convention (docs/development.md, "Docs that cannot drift"):
 *
 * - A fenced block whose info string holds the word `runnable` runs:
 *   ```sh runnable        every line a command
 *   ```console runnable   lines starting with `$ ` are commands, the lines under
 *                         one are output that must appear
 *   `exit=N` in the info string is the exit code every command of the block
 *   must have (default 0).
 * - Output lines are matched in order (stdout and stderr each in their own
 *   order), runs of spaces collapsed; `...` inside a line matches any text, a
 *   line of `...` alone is only there for the reader.
 * - A command is `fleetroll ARGS` (or `npx fleetroll`, `node dist/cli/main.js`)
 *   after optional NAME=value assignments; `export NAME=value` sets a variable
 *   for the rest of the block. It is split into an argument array by the small
 *   tokenizer below, never given to a shell: anything a shell would expand or
 *   interpret fails the test, so a runnable example stays one plain command.
 *
 * Needs `npm run build` first (npm test builds).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { guard } from '../support/wait.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = join(root, 'dist/cli/main.js');
const pages = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];

// ---------------------------------------------------------------- markdown

interface Block {
  file: string;
  line: number;
  info: string[];
  body: string[];
}

/**
 * Fenced code blocks (CommonMark: ``` or ~~~, at least three, closed by the
 * same character at least as long). A backtick fence's info string cannot
 * hold a backtick, so a prose line that starts with ```` ```sh ```` is not one.
 * The fence's indentation (a block inside a list item) is taken off its lines.
 */
function fencedBlocks(file: string, text: string): Block[] {
  const blocks: Block[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})(.*)$/.exec(lines[i]!);
    if (!open || (open[2]![0] === '`' && open[3]!.includes('`'))) continue;
    const [, indent, fence, info] = open as unknown as [string, string, string, string];
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const l = lines[j]!;
      if (new RegExp(`^\\s*${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`).test(l)) break;
      body.push(l.startsWith(indent) ? l.slice(indent.length) : l.trimStart());
    }
    blocks.push({ file, line: i + 1, info: info.trim().split(/\s+/).filter(Boolean), body });
    i = j;
  }
  return blocks;
}

/** Each line of the text, or undefined where it belongs to a fenced block (fences included). */
function outsideFences(text: string): (string | undefined)[] {
  let fence: string | undefined;
  return text.split('\n').map((l) => {
    const m = /^\s*(`{3,}|~{3,})(.*)$/.exec(l);
    if (fence === undefined) {
      if (!m || (m[1]![0] === '`' && m[2]!.includes('`'))) return l;
      fence = m[1]!;
    } else if (new RegExp(`^\\s*${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`).test(l)) fence = undefined;
    return undefined;
  });
}

/** The text outside fenced blocks, with inline code spans blanked (a link in code is not a link). */
function prose(text: string): string {
  const kept = outsideFences(text)
    .map((l) => l ?? '')
    .join('\n');
  // A code span runs from a run of backticks to the next run of the same length (it may span lines).
  return kept.replace(/(`+)[\s\S]*?\1/g, (s) => s.replace(/[^\n]/g, ' '));
}

/** GitHub's heading anchors (github-slugger): lowercase, punctuation dropped, spaces to dashes, repeats numbered. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const l of outsideFences(text)) {
    const m = l === undefined ? null : /^#{1,6}\s+(.*?)(\s+#+)?\s*$/.exec(l);
    if (!m) continue;
    const base = m[1]!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/`|\*\*|\*/g, '')
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

// ---------------------------------------------------------------- commands

/**
 * Splits one command line into words as a POSIX shell would for the subset
 * the docs use: blanks separate words, '...' is literal, "..." is literal but
 * for \" \\ \$ \`, a backslash outside quotes escapes the next character, and
 * a word starting with # begins a comment. Anything else a shell would act on
 * (| & ; < > ( ) $ ` * ? [ and a leading ~) throws: a runnable example must
 * not need a shell.
 */
function tokenize(line: string): string[] {
  const words: string[] = [];
  let word: string | undefined;
  const add = (s: string) => (word = (word ?? '') + s);
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === ' ' || c === '\t') {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (c === '#' && word === undefined) {
      break;
    } else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new Error(`unclosed ' in: ${line}`);
      add(line.slice(i + 1, end));
      i = end;
    } else if (c === '"') {
      let s = '';
      let j = i + 1;
      for (; j < line.length && line[j] !== '"'; j++) {
        const d = line[j]!;
        if (d === '\\' && '"\\$`'.includes(line[j + 1] ?? '')) s += line[++j];
        else if (d === '$' || d === '`') throw new Error(`${d} inside "..." would be expanded by a shell: ${line}`);
        else s += d;
      }
      if (j >= line.length) throw new Error(`unclosed " in: ${line}`);
      add(s);
      i = j;
    } else if (c === '\\') {
      if (i + 1 >= line.length) throw new Error(`a trailing \\ is a continuation, not part of a word: ${line}`);
      add(line[++i]!);
    } else if ('|&;<>()$`*?['.includes(c) || (c === '~' && word === undefined)) {
      throw new Error(`"${c}" is shell syntax: a runnable example must be one plain command: ${line}`);
    } else add(c);
  }
  if (word !== undefined) words.push(word);
  return words;
}

interface Command {
  line: number;
  text: string;
  /** Empty for `export NAME=value`. */
  args: string[];
  env: Record<string, string>;
  /** Output lines the docs show under it. */
  expected: string[];
}

const ASSIGNMENT = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s;

/** The commands of a runnable block, each with its arguments and the output shown under it. */
function commandsOf(block: Block): Command[] {
  const lang = block.info[0];
  const isConsole = lang === 'console';
  if (!isConsole && lang !== 'sh' && lang !== 'bash') throw new Error(`${block.file}:${block.line}: a runnable block is sh, bash or console, not ${lang}`);
  const commands: Command[] = [];
  for (let i = 0; i < block.body.length; i++) {
    const lineNo = block.line + 1 + i;
    let text = block.body[i]!;
    if (isConsole && !text.startsWith('$ ')) {
      if (!commands.length) {
        if (text.trim() === '') continue;
        throw new Error(`${block.file}:${lineNo}: output before the first "$ " command`);
      }
      commands.at(-1)!.expected.push(text);
      continue;
    }
    if (isConsole) text = text.slice(2);
    if (!isConsole && text.trim() === '') continue;
    // A line ending in an odd number of backslashes continues on the next one.
    while (/(^|[^\\])(\\\\)*\\$/.test(text) && i + 1 < block.body.length) text = `${text.slice(0, -1)} ${block.body[++i]!.trimStart()}`;
    const words = tokenize(text);
    if (!words.length) continue;
    const env: Record<string, string> = {};
    while (words.length && ASSIGNMENT.test(words[0]!)) {
      const [, k, v] = ASSIGNMENT.exec(words.shift()!)!;
      env[k!] = v!;
    }
    if (words[0] === 'export') {
      for (const w of words.slice(1)) {
        const m = ASSIGNMENT.exec(w);
        if (!m) throw new Error(`${block.file}:${lineNo}: export takes NAME=value, got ${w}`);
        env[m[1]!] = m[2]!;
      }
      commands.push({ line: lineNo, text, args: [], env, expected: [] });
      continue;
    }
    let args: string[];
    if (words[0] === 'fleetroll') args = words.slice(1);
    else if (words[0] === 'npx' && words[1] === 'fleetroll') args = words.slice(2);
    else if (words[0] === 'node' && words[1] === 'dist/cli/main.js') args = words.slice(2);
    else throw new Error(`${block.file}:${lineNo}: a runnable command is fleetroll ..., got: ${text}`);
    commands.push({ line: lineNo, text, args, env, expected: [] });
  }
  if (!commands.some((c) => c.args.length)) throw new Error(`${block.file}:${block.line}: a runnable block with no fleetroll command`);
  return commands;
}

const squash = (s: string) => s.replace(/\s+/g, ' ').trim();

/** An output line as a pattern: spaces collapsed, `...` any text. */
function linePattern(expected: string): RegExp {
  const parts = squash(expected)
    .split('...')
    .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${parts.join('.*')}$`);
}

/** The expected lines that do not appear in order; [] when all do. */
function missingLines(expected: string[], stdout: string, stderr: string): string[] {
  const streams = [stdout, stderr].map((s) => ({ lines: s.split('\n').map(squash), at: 0 }));
  const missing: string[] = [];
  for (const e of expected) {
    if (squash(e) === '' || squash(e) === '...') continue;
    const p = linePattern(e);
    const found = streams.some((s) => {
      const k = s.lines.findIndex((l, idx) => idx >= s.at && p.test(l));
      if (k < 0) return false;
      s.at = k + 1;
      return true;
    });
    if (!found) missing.push(e);
  }
  return missing;
}

/** The environment of a user with nothing set: what a runnable example may assume. */
function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of ['PATH', 'HOME', 'TMPDIR', 'LANG']) if (process.env[k] !== undefined) env[k] = process.env[k]!;
  return env;
}

function run(args: string[], env: Record<string, string>): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [bin, ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    // A hang guard, not a measurement: plan -f gives up on an unreachable host after 2 s.
    const timer = setTimeout(() => child.kill('SIGKILL'), guard(60_000));
    child.on('error', fail);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      done({ code, signal, stdout, stderr });
    });
  });
}

// ---------------------------------------------------------------- the tests

const texts = new Map(pages.map((p) => [p, readFileSync(join(root, p), 'utf8')]));
const runnable = [...texts].flatMap(([file, text]) => fencedBlocks(file, text)).filter((b) => b.info.slice(1).includes('runnable'));

describe('the tokenizer for runnable examples', () => {
  const rows: [string, string[]][] = [
    ['fleetroll plan --replicas 4', ['fleetroll', 'plan', '--replicas', '4']],
    ['fleetroll deploy -f fleet.yaml --change-cause "fix #12"   # a comment', ['fleetroll', 'deploy', '-f', 'fleet.yaml', '--change-cause', 'fix #12']],
    [`fleetroll x 'a b' "c \\"d\\"" e\\ f g#h`, ['fleetroll', 'x', 'a b', 'c "d"', 'e f', 'g#h']],
    ['export A=1 B="two words"', ['export', 'A=1', 'B=two words']],
    ["fleetroll x ''", ['fleetroll', 'x', '']],
  ];
  for (const [line, want] of rows) it(`splits ${line}`, () => assert.deepEqual(tokenize(line), want));
  for (const line of [
    'fleetroll plan | head',
    'fleetroll plan && x',
    'fleetroll plan > out',
    'fleetroll -f $FILE',
    'fleetroll "$HOME"',
    'fleetroll -f *.yaml',
    'fleetroll -f ~/f.yaml',
    'fleetroll $(x)',
    "fleetroll 'open",
  ]) {
    it(`refuses ${line}`, () => assert.throws(() => tokenize(line)));
  }
  it('matches output lines in order, ... as any text, spaces collapsed', () => {
    assert.deepEqual(missingLines(['a  b', '...', '{"x":1,...}'], 'a b\nnoise\n{"x":1,"y":2}\n', ''), []);
    assert.deepEqual(missingLines(['second', 'first'], 'first\nsecond\n', ''), ['first']);
    assert.deepEqual(missingLines(['out', 'err'], 'out\n', 'err\n'), []);
    assert.deepEqual(missingLines(['a'], 'ab\n', ''), ['a'], 'a line must match whole');
  });
});

describe('runnable examples in README.md and docs/*.md', { concurrency: 3 }, () => {
  it('there are runnable examples, and the CLI is built', () => {
    assert.ok(runnable.length >= 20, `found only ${runnable.length} runnable blocks: is the marker still "runnable"?`);
    assert.ok(existsSync(bin), `${relative(root, bin)} is missing: run npm run build first`);
  });

  for (const block of runnable) {
    const exit = Number(block.info.find((w) => w.startsWith('exit='))?.slice(5) ?? 0);
    it(`${block.file}:${block.line} (exit ${exit})`, async () => {
      const env = baseEnv();
      for (const c of commandsOf(block)) {
        if (!c.args.length) {
          Object.assign(env, c.env); // export: for the rest of the block
          continue;
        }
        const r = await run(c.args, { ...env, ...c.env }); // NAME=value before a command: for it alone
        const where = `${block.file}:${c.line}: ${c.text}\n--- stdout\n${r.stdout}--- stderr\n${r.stderr}`;
        assert.equal(r.code, exit, `exit ${r.code ?? r.signal}, the docs say ${exit}\n${where}`);
        const missing = missingLines(c.expected, r.stdout, r.stderr);
        assert.deepEqual(missing, [], `output lines the docs show but the command did not print (in this order):\n${where}`);
      }
    });
  }
});

describe('links in README.md and docs/*.md', () => {
  const slugs = new Map<string, Set<string>>();
  const anchorsOf = (file: string) => {
    if (!slugs.has(file)) slugs.set(file, anchors(readFileSync(file, 'utf8')));
    return slugs.get(file)!;
  };
  for (const [page, text] of texts) {
    it(`every relative link and #anchor in ${page} resolves`, () => {
      const broken: string[] = [];
      for (const m of prose(text).matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
        const target = m[1]!;
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue;
        const [path, anchor] = target.split('#', 2) as [string, string | undefined];
        const file = path === '' ? join(root, page) : resolve(dirname(join(root, page)), decodeURIComponent(path));
        if (!existsSync(file)) {
          broken.push(`${target}: no such file`);
          continue;
        }
        if (anchor !== undefined && file.endsWith('.md') && statSync(file).isFile() && !anchorsOf(file).has(anchor.toLowerCase())) {
          broken.push(`${target}: no heading with the anchor #${anchor} in ${relative(root, file)}`);
        }
      }
      assert.deepEqual(broken, []);
    });
  }

  it('the README stays an entry point (at most about 250 lines), and every docs page is linked from the index', () => {
    assert.ok(texts.get('README.md')!.split('\n').length <= 250, 'README.md: move detail into a docs/ page');
    const index = texts.get('docs/README.md') ?? '';
    const unlinked = pages.filter((p) => p.startsWith('docs/') && p !== 'docs/README.md' && !index.includes(`](${p.slice(5)})`));
    assert.deepEqual(unlinked, [], 'docs/README.md links every page');
  });
});
