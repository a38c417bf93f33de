/**
 * Reading YAML/JSON documents as hostile input (src/config/document.ts): every
 * reproducer of hostile input found by fuzzing is refused as invalid input
 * (exit 2) with a path or a line, never quoting the text, and nothing blocks,
 * balloons or recurses away.
 * The FIFO, which needs mkfifo to make, is in test/local/document.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { MAX_DEPTH, MAX_DOCUMENT_BYTES, MAX_ISSUES, parseDocumentText, readDocument, readTextFile } from '../../src/config/document.js';
import { ValidationError } from '../../src/errors.js';
import { refusedRead } from '../support/refused-read.js';

const dir = mkdtempSync(join(tmpdir(), 'fleetroll-document-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
function file(text: string | Buffer, name = `doc-${n++}.yaml`): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

const SECRET = 'SECRET_MARKER_123';
const BASE = 'service: x\nimage: x:1\nreplicas: 1\nport: 80\n';

function parse(text: string): Record<string, unknown> {
  return parseDocumentText(text, 'fleet.yaml', 'fleet file');
}

/** The ValidationError (exit 2) that parsing `text` must end in. */
function refused(text: string): ValidationError {
  try {
    parse(text);
  } catch (err) {
    assert.ok(err instanceof ValidationError, `a ValidationError, got ${String(err)}`);
    assert.equal(err.exitCode, 2);
    return err;
  }
  assert.fail('expected the document to be refused');
}

/** Everything a user could see of an error. */
function shown(err: ValidationError): string {
  return [err.message, ...err.issues.flatMap((i) => [i.path, i.message])].join('\n');
}

function paths(err: ValidationError): string[] {
  return err.issues.map((i) => i.path);
}

const aliases = (count: number): string => `${BASE}env:\n  A: &a v\n${Array.from({ length: count }, (_, i) => `  K${i}: *a\n`).join('')}`;
function billionLaughs(): string {
  let text = `${BASE}a: &a [x,x,x,x,x,x,x,x,x]\n`;
  let prev = 'a';
  for (const name of 'bcdefghi') {
    text += `${name}: &${name} [${Array(9).fill(`*${prev}`).join(',')}]\n`;
    prev = name;
  }
  return text;
}

describe('parseDocumentText: aliases and anchors are refused', () => {
  const rows: [string, string, RegExp][] = [
    ['an alias to no anchor (was an unexpected error, exit 1)', 'service: x\nversion: *nope\n', /^version$/],
    ['more than 100 aliases (was "Excessive alias count", exit 1)', aliases(150), /^env\/K0$/],
    ['a billion-laughs file (was exit 1 from toJS)', billionLaughs(), /^b\/0$/],
    ['an anchor alone', `${BASE}env:\n  A: &a v\n`, /^env\/A$/],
    ['a merge key', `${BASE}env:\n  <<: {A: b}\n`, /^env\/<<$/],
    ['an alias as a key', `${BASE}env:\n  A: &k K\n  *k : v\n`, /^env\/A$/],
  ];
  for (const [name, text, path] of rows) {
    it(name, () => {
      const err = refused(text);
      assert.ok(
        paths(err).some((p) => path.test(p)),
        `a path like ${path}, got ${JSON.stringify(err.issues)}`,
      );
      assert.ok(err.issues.length <= MAX_ISSUES + 1, 'the list is capped');
    });
  }

  it('a long list of problems ends with how many more there are', () => {
    const err = refused(aliases(150));
    assert.equal(err.issues.length, MAX_ISSUES + 1);
    assert.match(err.issues.at(-1)?.message ?? '', /^and \d+ more problems$/);
  });
});

describe('parseDocumentText: no message quotes the text', () => {
  const starts = ['*', '|', '>', ']', '}', '{', '[', '"', "'", '@', '`', '%', '&', '!', '!!', '? ', '- ', ': ', '#'];
  for (const start of starts) {
    it(`an env value starting with ${JSON.stringify(start)}`, () => {
      const text = `${BASE}env:\n  B: 1\n  API_TOKEN: ${start}${SECRET}\n  C: 2\n`;
      let err: unknown;
      try {
        parse(text);
      } catch (e) {
        err = e;
      }
      if (err === undefined) return; // parsed (e.g. `- ` makes a list): the schema, not this module, says what is wrong
      assert.ok(err instanceof ValidationError, String(err));
      assert.equal(err.exitCode, 2);
      assert.ok(!shown(err).includes(SECRET), `the secret leaked: ${shown(err)}`);
      assert.ok(!shown(err).includes('SECRET'), 'not even a part of it');
    });
  }

  it('the rows above that the yaml parser quoted are refused with the key path and the line', () => {
    for (const start of ['|', '>', ']', '}']) {
      const err = refused(`${BASE}env:\n  B: 1\n  API_TOKEN: ${start}${SECRET}\n  C: 2\n`);
      assert.match(err.issues[0]?.path ?? '', /^line 7, column 1[45]$/, start);
      assert.match(err.issues[0]?.message ?? '', /^env\/API_TOKEN: .*put it in quotes/, start);
    }
  });

  it('a secret inside a flow mapping value never becomes part of a path', () => {
    for (const text of [
      `${BASE}env:\n  API_TOKEN: {${SECRET}: !x y}\n`,
      `${BASE}env:\n  API_TOKEN: {${SECRET}: a, ${SECRET}: b}\n`,
      `${BASE}env:\n  API_TOKEN: {${SECRET}\n`,
      `${BASE}env:\n  API_TOKEN: ${SECRET}: x\n`,
      `${BASE}env:\n  API_TOKEN: [&${SECRET} a]\n`,
    ]) {
      const err = refused(text);
      assert.ok(!shown(err).includes(SECRET), `the secret leaked: ${shown(err)}`);
    }
  });

  it('a duplicate key names the key, not either value', () => {
    const err = refused(`${BASE}env:\n  A: b\n  A: ${SECRET}\n`);
    assert.deepEqual(paths(err), ['env/A']);
    assert.match(err.issues[0]?.message ?? '', /^duplicate key: first given at line 6, column 3 \(line 7, column 3\)$/);
    assert.ok(!shown(err).includes(SECRET));
  });

  it('fuzz: a value of special characters around the marker never ends in anything but a ValidationError without it', () => {
    const chars = ['|', '>', '[', ']', '{', '}', '*', '&', '!', '%', '@', '`', "'", '"', '#', ':', ',', '?', '-', ' ', '\t', '\\', '<<', 'a'];
    let seed = 23;
    const next = (): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed;
    };
    const pick = (len: number): string => Array.from({ length: len }, () => chars[next() % chars.length]).join('');
    for (let i = 0; i < 400; i++) {
      const text = `${BASE}env:\n  API_TOKEN: ${pick(1 + (next() % 4))}${SECRET}${pick(next() % 4)}\n  NEXT: 1\n`;
      try {
        parse(text);
      } catch (err) {
        assert.ok(err instanceof ValidationError, `${JSON.stringify(text)}: ${String(err)}`);
        assert.ok(!shown(err).includes(SECRET), `${JSON.stringify(text)} leaked: ${shown(err)}`);
      }
    }
  });
});

describe('parseDocumentText: only the core tags', () => {
  const rows: [string, string, string][] = [
    ['a custom tag on a secret (was accepted as "")', `${BASE}env:\n  API_TOKEN: !s3cret\n`, 'env/API_TOKEN'],
    ['a custom tag before a value', `${BASE}env:\n  API_TOKEN: !s3cret value\n`, 'env/API_TOKEN'],
    ['a verbatim tag', `${BASE}env:\n  A: !<tag:example.com:x> y\n`, 'env/A'],
    ['the non-specific tag', `${BASE}env:\n  A: ! y\n`, 'env/A'],
    ['!!binary', `${BASE}env:\n  A: !!binary aGk=\n`, 'env/A'],
    ['!!timestamp', `${BASE}env:\n  A: !!timestamp 2001-01-01\n`, 'env/A'],
    ['a %TAG handle redefining !!', `%TAG !! tag:example.com,2000:\n---\n${BASE}env:\n  A: !!str y\n`, 'env/A'],
    ['a custom tag on a mapping', `${BASE}env: !thing\n  A: b\n`, 'env'],
  ];
  for (const [name, text, path] of rows) {
    it(name, () => {
      const err = refused(text);
      assert.deepEqual(paths(err), [path], JSON.stringify(err.issues));
      assert.ok(!shown(err).includes('s3cret'), 'the tag is not quoted: it may be the secret');
    });
  }

  it('the core tags are allowed and resolve as YAML 1.2 says', () => {
    assert.deepEqual(parse('a: !!str 5\nb: !!int "7"\nc: !!float 1.5\nd: !!bool true\ne: !!null ""\nf: !!map {x: 1}\ng: !!seq [1]\n'), {
      a: '5',
      b: 7,
      c: 1.5,
      d: true,
      e: null,
      f: { x: 1 },
      g: [1],
    });
  });
});

describe('parseDocumentText: only plain mappings and lists', () => {
  const rows: [string, string, string][] = [
    ['!!omap (was a Map the schema dropped)', `${BASE}env: !!omap\n  - A: b\n`, 'env'],
    ['!!set (was a Set the schema dropped)', `${BASE}env: !!set\n  ? A\n`, 'env'],
    ['!!pairs', `${BASE}env: !!pairs\n  - A: b\n`, 'env'],
    [
      '!!omap where an object schema would take its defaults (was valid, the custom path lost)',
      `${BASE}probes: !!omap\n  - readiness:\n      path: /custom\n`,
      'probes',
    ],
    ['!!set where an object schema would take its defaults (was valid)', `${BASE}hooks: !!set\n  ? preDeploy\n`, 'hooks'],
    ['a mapping as a key', `${BASE}env:\n  ? {a: b}\n  : c\n`, 'env'],
    ['a list as a key', `${BASE}env:\n  ? [a]\n  : c\n`, 'env'],
  ];
  for (const [name, text, path] of rows) {
    it(name, () => {
      assert.deepEqual(paths(refused(text)), [path]);
    });
  }
});

describe('parseDocumentText: keys that reach Object.prototype', () => {
  for (const key of ['__proto__', 'constructor', 'prototype']) {
    it(`${key} under env (was dropped without an error)`, () => {
      const err = refused(`${BASE}env:\n  ${key}: x\n  B: y\n`);
      assert.deepEqual(paths(err), [`env/${key}`]);
    });
    it(`${key} as a quoted key in pretty JSON, anywhere`, () => {
      const json = JSON.stringify({ hosts: [{ name: 'a', KEY: { x: 1 } }] }, null, 2).replace('"KEY"', JSON.stringify(key));
      assert.deepEqual(paths(refused(json)), [`hosts/0/${key}`]);
    });
    it(`${key} in one-line JSON: placed by line and column (keys mid-line are not trusted to name a path)`, () => {
      assert.deepEqual(paths(refused(`{"hosts": [{"name": "a", "${key}": {"x": 1}}]}`)), ['line 1, column 26']);
    });
  }

  it('in tab-indented JSON the keys still name the path', () => {
    const json = JSON.stringify({ env: { KEY: 'x' } }, null, '\t').replace('"KEY"', '"__proto__"');
    assert.deepEqual(paths(refused(json)), ['env/__proto__']);
  });

  it('mappings come out as plain objects (zod needs Object.prototype)', () => {
    const v = parse(`${BASE}env:\n  A: b\nhosts:\n  - name: a\n`);
    assert.equal(Object.getPrototypeOf(v), Object.prototype);
    assert.equal(Object.getPrototypeOf(v.env), Object.prototype);
    assert.equal(Object.getPrototypeOf((v.hosts as unknown[])[0]), Object.prototype);
  });
});

describe('readTextFile: only regular files of bounded size', () => {
  it('/dev/zero is refused before a byte is read (was 605 MB of memory)', async () => {
    const err = await refusedRead(readTextFile('/dev/zero', 'fleet file'));
    assert.equal(err.message, 'cannot read fleet file /dev/zero: is not a regular file (a character device)');
  });

  it('/dev/urandom likewise (was 1.1 GB)', async () => {
    assert.match((await refusedRead(readTextFile('/dev/urandom', 'fleet file'))).message, /is not a regular file \(a character device\)$/);
  });

  it('a file over the limit is refused with its size and the limit', async () => {
    const big = file(Buffer.alloc(Math.round(3.2 * 1024 * 1024), 'a'));
    const err = await refusedRead(readTextFile(big, 'fleet file'));
    assert.equal(err.message, `cannot read fleet file ${big}: it is 3.2 MiB, larger than the 1 MiB a fleet file may be`);
  });

  it('a file exactly at the limit is read', async () => {
    assert.equal((await readTextFile(file(Buffer.alloc(MAX_DOCUMENT_BYTES, 'a')), 'fleet file')).length, MAX_DOCUMENT_BYTES);
  });

  it('a file that reports no size (/proc) is cut off at the limit', async () => {
    const err = await refusedRead(readTextFile('/proc/self/status', 'fleet file', 100));
    assert.match(err.message, /: it is more than 100 bytes, larger than the 100 bytes a fleet file may be$/);
  });

  const rows: [string, () => string, string, string][] = [
    ['no such file', () => join(dir, 'nope.yaml'), 'no such file', 'E_NO_FILE'],
    ['a path through a file', () => join(file('x: 1\n'), 'below.yaml'), 'no such file', 'E_NO_FILE'],
    [
      'a directory',
      () => {
        const d = join(dir, `sub-${n++}`);
        mkdirSync(d);
        return d;
      },
      'is a directory',
      'E_NO_FILE',
    ],
    ['bytes that are not UTF-8', () => file(Buffer.from([0x61, 0x3a, 0x20, 0xff, 0xfe, 0x0a])), 'is not UTF-8 text', 'E_INVALID'],
  ];
  for (const [name, path, why, code] of rows) {
    it(name, async () => {
      const p = path();
      const err = await refusedRead(readTextFile(p, 'fleet file'));
      assert.equal(err.message, `cannot read fleet file ${p}: ${why}`);
      assert.equal(err.code, code);
    });
  }
});

describe('parseDocumentText: duplicate keys in linear time', () => {
  const env = (count: number, dup = false): string =>
    `${BASE}env:\n${Array.from({ length: count }, (_, i) => `  K${i}: v${i}\n`).join('')}${dup ? '  K0: again\n' : ''}`;

  function best(text: string): number {
    let min = Infinity;
    for (let i = 0; i < 2; i++) {
      const t0 = performance.now();
      parse(text);
      min = Math.min(min, performance.now() - t0);
    }
    return min;
  }

  it('a 16k-key env parses (was 7.4 s) and a duplicate at its end is found, with both lines', () => {
    assert.equal(Object.keys(parse(env(16_000)).env as object).length, 16_000);
    const err = refused(env(16_000, true));
    assert.deepEqual(paths(err), ['env/K0']);
    assert.match(err.issues[0]?.message ?? '', /^duplicate key: first given at line 6, column 3 \(line 16006, column 3\)$/);
  });

  // One-line flow style (minified JSON) caught a per-key scan back to the line start.
  const flow = (count: number): string => `${BASE}env: {${Array.from({ length: count }, (_, i) => `K${i}: v`).join(', ')}}\n`;
  for (const [style, make] of [
    ['block', env],
    ['one-line flow', flow],
  ] as const) {
    it(`${style}: 100k keys take less than 40 times as long as 10k (quadratic would be 100; was 251 s)`, () => {
      const small = make(10_000);
      const large = make(100_000);
      best(small); // warm the JIT so the ratio compares steady states
      const ratio = best(large) / best(small);
      assert.ok(ratio < 40, `time(100k) / time(10k) = ${ratio.toFixed(1)}`);
    });
  }
});

describe('parseDocumentText: nesting depth is capped', () => {
  const flow = (depth: number): string => `${BASE}extra: ${'['.repeat(depth)}${']'.repeat(depth)}\n`;
  const block = (depth: number): string =>
    `${BASE}extra:\n${Array.from({ length: depth }, (_, i) => `${' '.repeat(i + 1)}k${i}:\n`).join('')}${' '.repeat(depth + 1)}v: 1\n`;
  const rows: [string, string][] = [
    ['2000 flow lists (was "Maximum call stack size exceeded")', flow(2000)],
    ['900 block mappings (was "Maximum call stack size exceeded")', block(900)],
    ['200 000 flow lists', flow(200_000)],
    ['"- " lists on one line', `${BASE}extra:\n${'- '.repeat(5000)}x\n`],
    [`${MAX_DEPTH} lists below the top-level mapping`, flow(MAX_DEPTH)],
  ];
  for (const [name, text] of rows) {
    it(name, () => {
      const err = refused(text);
      assert.equal(err.issues.length, 1);
      assert.match(err.issues[0]?.path ?? '', /^line \d+, column \d+$/);
      assert.equal(err.issues[0]?.message, `nested deeper than ${MAX_DEPTH} levels of mappings and lists`);
    });
  }

  it(`${MAX_DEPTH} levels in all are allowed`, () => {
    assert.ok(parse(flow(MAX_DEPTH - 1)));
  });
});

describe('parseDocumentText: what still loads, and the top level', () => {
  it('JSON is YAML: a JSON file loads, tabs and all', () => {
    const json = JSON.stringify({ service: 'x', image: 'x:1', env: { A: 'b', N: 1.5, T: true, Z: null }, hosts: [{ name: 'a' }] }, null, '\t');
    assert.deepEqual(parse(json), { service: 'x', image: 'x:1', env: { A: 'b', N: 1.5, T: true, Z: null }, hosts: [{ name: 'a' }] });
  });

  it('YAML 1.2 core scalars and keys come out as yaml.toJS made them', () => {
    assert.deepEqual(parse('a: 0x10\nb: 1e3\nc: ~\nd: "07"\ne: yes\n1: one\ntrue: t\nf: [a: b]\ng: |\n  text\n'), {
      a: 16,
      b: 1000,
      c: null,
      d: '07',
      e: 'yes',
      1: 'one',
      true: 't',
      f: [{ a: 'b' }],
      g: 'text\n',
    });
  });

  const rows: [string, string, string][] = [
    ['an empty file', '', 'fleet file must be a mapping (YAML object), got an empty document'],
    ['only a comment', '# nothing\n', 'fleet file must be a mapping (YAML object), got an empty document'],
    ['a list', '- a\n', 'fleet file must be a mapping (YAML object), got a list'],
    ['a string', 'hello\n', 'fleet file must be a mapping (YAML object), got string'],
  ];
  for (const [name, text, message] of rows) {
    it(`the top level must be a mapping: ${name}`, () => {
      assert.deepEqual(refused(text).issues, [{ path: '', message }]);
    });
  }

  it('a second document is refused', () => {
    assert.deepEqual(refused('a: 1\n---\nb: 2\n').issues, [
      { path: 'line 2, column 1', message: 'the file holds more than one YAML document (a second ---): keep one' },
    ]);
  });

  it('a syntax error gives line and column, and the source in the message', () => {
    const err = refused('service: a\n  image: [\n');
    assert.match(err.issues[0]?.path ?? '', /^line \d+, column \d+$/);
    assert.match(err.message, /^fleet\.yaml: /);
  });

  it('readDocument reads then parses', async () => {
    assert.deepEqual(await readDocument(file('a: 1\n'), 'fleet file'), { a: 1 });
    await assert.rejects(
      readDocument(file('a: *b\n'), 'fleet file'),
      (e: unknown) => e instanceof ValidationError && e.exitCode === 2 && e.issues[0]?.path === 'a',
    );
  });
});
