/**
 * Generators for the fuzz suite (test/local/fuzz.test.ts): fleet files,
 * defaults files, upstream templates and experiment specs, mostly near the
 * valid shape (so the checks past the schema run) with invalid values,
 * YAML oddities and secret markers mixed in.
 *
 * A document is built as a value tree and written by a small YAML emitter of
 * our own, so that a `Raw` node can put text the YAML library would never
 * write (an unquoted `*secret`, a tag, a block scalar) exactly where a user
 * could, and nowhere else: a secret marker only ever sits in a secret-ish
 * field's value, so any output holding it is a leak, not a moved key.
 */
import fc from 'fast-check';

/** Text inserted verbatim where a scalar goes; lines after the first are indented under the key. */
export class Raw {
  constructor(readonly text: string) {}
}

export type Tree = string | number | boolean | null | Raw | Tree[] | { [k: string]: Tree };

/** An environment variable the CLI children (and the test process) hold the marker in. */
export const SECRET_VAR = 'FUZZ_SECRET_VAR';

const RESERVED = /^(?:true|false|null|yes|no|on|off|y|n|~|[-+]?\.?(?:inf|nan))$/i;
const PLAIN = /^[A-Za-z/][A-Za-z0-9_./@%+-]*(?::[A-Za-z0-9_./@%+-]+)*$/;

function scalar(v: string | number | boolean | null): string {
  if (v === null) return 'null';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : v > 0 ? '.inf' : v < 0 ? '-.inf' : '.nan';
  if (typeof v === 'boolean') return String(v);
  if (PLAIN.test(v) && !RESERVED.test(v) && !/^[0-9]/.test(v)) return v;
  return JSON.stringify(v);
}

function keyText(k: string): string {
  return /^[A-Za-z_][A-Za-z0-9_.-]*$/.test(k) ? k : JSON.stringify(k);
}

const isLeaf = (v: Tree): v is string | number | boolean | null | Raw => v === null || typeof v !== 'object' || v instanceof Raw;

function leafText(v: string | number | boolean | null | Raw, indent: number): string {
  if (!(v instanceof Raw)) return scalar(v);
  const [first = '', ...rest] = v.text.split('\n');
  return [first, ...rest.map((l) => `${' '.repeat(indent + 2)}${l}`)].join('\n');
}

/** Block-style YAML of a tree (empty collections in flow style). */
export function toYaml(v: Tree, indent = 0): string {
  const pad = ' '.repeat(indent);
  if (isLeaf(v)) return `${pad}${leafText(v, indent)}\n`;
  if (Array.isArray(v)) {
    if (v.length === 0) return `${pad}[]\n`;
    return v
      .map((x) =>
        isLeaf(x) ? `${pad}- ${leafText(x, indent)}\n` : isEmpty(x) ? `${pad}- ${Array.isArray(x) ? '[]' : '{}'}\n` : `${pad}-\n${toYaml(x, indent + 2)}`,
      )
      .join('');
  }
  const entries = Object.entries(v);
  if (entries.length === 0) return `${pad}{}\n`;
  return entries
    .map(([k, x]) =>
      isLeaf(x)
        ? `${pad}${keyText(k)}: ${leafText(x, indent)}\n`
        : isEmpty(x)
          ? `${pad}${keyText(k)}: ${Array.isArray(x) ? '[]' : '{}'}\n`
          : `${pad}${keyText(k)}:\n${toYaml(x, indent + 2)}`,
    )
    .join('');
}

const isEmpty = (v: Tree) => (Array.isArray(v) ? v.length === 0 : v !== null && typeof v === 'object' && !(v instanceof Raw) && Object.keys(v).length === 0);

const hasRaw = (v: Tree): boolean =>
  v instanceof Raw || (Array.isArray(v) ? v.some(hasRaw) : v !== null && typeof v === 'object' ? Object.values(v).some(hasRaw) : false);

/** A tree as a document: YAML, or JSON (also YAML) when nothing raw is in it, with an optional document-level twist. */
export function serialize(tree: Tree, style: DocStyle): string {
  const body = style.json && !hasRaw(tree) ? `${JSON.stringify(tree, null, style.compactJson ? 0 : 2)}\n` : toYaml(tree);
  let text = `${style.prefix}${body}${style.suffix}`;
  if (style.crlf) text = text.replace(/\n/g, '\r\n');
  return text;
}

export interface DocStyle {
  json: boolean;
  compactJson: boolean;
  crlf: boolean;
  prefix: string;
  suffix: string;
}

export interface FileCase {
  /** Files to write into the case's own directory, by relative name. */
  files: Record<string, string>;
  /** The file to pass to -f. */
  main: string;
  /** A short description for failure messages. */
  what: string;
}

type Mode = 'clean' | 'noisy';

/**
 * The generators, built twice: `clean` keeps to values the schema allows (the
 * checks past it, the renderer and nginx see many accepted fleets), `noisy`
 * mixes in wrong values, YAML junk and secrets written as YAML syntax.
 */
function build(MODE: Mode) {
  /** The clean arbitrary in clean mode, the other in noisy mode. */
  const pick = <T>(c: fc.Arbitrary<T>, n: fc.Arbitrary<T>): fc.Arbitrary<T> => (MODE === 'clean' ? c : n);
  const docStyle: fc.Arbitrary<DocStyle> = fc.record({
    json: fc.boolean(),
    compactJson: fc.boolean(),
    crlf: fc.oneof({ weight: 6, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
    prefix:
      MODE === 'clean'
        ? fc.constantFrom('', '', '---\n', '# comment\n', '%YAML 1.2\n---\n')
        : fc.oneof(
            { weight: 12, arbitrary: fc.constant('') },
            fc.constantFrom('---\n', '%YAML 1.2\n---\n', '%YAML 1.1\n---\n', '\uFEFF', '# comment\n', '%TAG !e! tag:example.com,2000:\n---\n'),
          ),
    suffix:
      MODE === 'clean'
        ? fc.constantFrom('', '', '...\n', '# trailing\n')
        : fc.oneof({ weight: 12, arbitrary: fc.constant('') }, fc.constantFrom('...\n', '---\nservice: second-doc\n', '# trailing\n', '\n\n\n', '---\n')),
  });

  /** Raw text for a field that is not a secret: what a careless edit or a YAML feature puts there. */
  const yamlJunk: fc.Arbitrary<Raw> = fc
    .constantFrom(
      '*undefined_anchor',
      '&anchor value',
      '!unknowntag value',
      '!!str 42',
      '!!int 0x1F',
      '!!float 1e3',
      '!!binary aGVsbG8=',
      '!!timestamp 2001-12-14',
      '!!set { a, b }',
      '!!omap [ a: 1, b: 2 ]',
      '!!pairs [ a: 1 ]',
      '!!null',
      '[unclosed',
      '{unclosed: 1',
      '"unterminated',
      "'unterminated",
      '|',
      '>-',
      '|\nblock text\nmore',
      'a: b: c',
      '- item',
      '@reserved',
      '`backtick',
      '%percent',
      '? complex key',
      '0o17',
      '0x10',
      '1_000',
      '.inf',
      '-.nan',
      '~',
      '""',
      "''",
      '12:30:00',
      '2024-01-01',
      '{ <<: {a: 1} }',
      '\t tab',
      'x # comment',
      '#',
    )
    .map((t) => new Raw(t));

  /** A field value: mostly `good`, sometimes a wrong value, sometimes YAML junk. */
  function field<T extends Tree>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<Tree>): fc.Arbitrary<Tree> {
    if (MODE === 'clean') return good as fc.Arbitrary<Tree>;
    return fc.oneof(
      { weight: 10, arbitrary: good as fc.Arbitrary<Tree> },
      { weight: 2, arbitrary: bad },
      { weight: 1, arbitrary: yamlJunk as fc.Arbitrary<Tree> },
    );
  }

  const lowerName = (max: number) => fc.stringMatching(new RegExp(`^[a-z][a-z0-9-]{0,${max - 1}}$`)).filter((s) => !s.endsWith('-'));
  const ident = (min: number, max: number) => fc.stringMatching(new RegExp(`^[A-Za-z_][A-Za-z0-9_]{${min - 1},${max - 1}}$`));
  const anyText = fc.string({ unit: 'binary', maxLength: 40 });

  const serviceArb = field(lowerName(20), fc.oneof(fc.constantFrom('', 'UPPER', '-dash', 'a_b', 'x'.repeat(64), 'ok.dot', 'naïve'), fc.integer(), anyText));

  const imageArb = field(
    fc.oneof(
      fc.tuple(lowerName(12), fc.stringMatching(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,9}$/)).map(([n, t]) => `${n}:${t}`),
      fc.constantFrom('registry.example:5000/team/app:1.2.3', 'localhost/app', 'app', `app@sha256:${'a'.repeat(64)}`, 'ghcr.io/o/r:v1'),
    ),
    fc.constantFrom(
      'a:',
      'A/b:1',
      'a//b:1',
      'a:b:c',
      '/a:1',
      'a/:1',
      `app@sha256:${'a'.repeat(63)}`,
      'app@md5:abc',
      'a'.repeat(300),
      'a b:1',
      'reg..x/a:1',
      ':1',
      '_a:1',
      'a:.x',
      'a:-x',
    ),
  );

  const intish = (lo: number, hi: number, badLo: number, badHi: number) =>
    field(
      fc.integer({ min: lo, max: hi }),
      fc.oneof(fc.integer({ min: badLo, max: badHi }), fc.constantFrom(1.5, -0, 1e21, Number.NaN, '3', 'three', true, null), fc.double()),
    );

  const secondsArb = (hi: number, lo = 0) =>
    field(
      MODE === 'clean'
        ? fc.oneof(
            fc.integer({ min: lo, max: hi }),
            fc.integer({ min: lo * 10, max: hi * 10 }).map((t) => t / 10),
          )
        : fc.oneof(fc.integer({ min: lo, max: hi }), fc.double({ min: lo, max: hi, noNaN: true })),
      fc.oneof(fc.integer({ min: -100, max: hi * 100 }), fc.constantFrom('30s', null, true, -1, Number.POSITIVE_INFINITY)),
    );

  /** A percent or a count for maxSurge / maxUnavailable. */
  const intOrPercentArb = field(
    fc.oneof(
      fc.integer({ min: 0, max: 10 }),
      fc.integer({ min: 0, max: 100 }).map((n) => `${n}%`),
    ),
    fc.constantFrom('25 %', '%', '101%', '-1', -1, '1.5%', 1.5, '1e2%', '0x10', '', '２５%', null),
  );

  const hostNameArb = field(lowerName(10), fc.constantFrom('', 'Local', '-x', 'a'.repeat(64), 'a_b'));

  const portText =
    MODE === 'clean'
      ? fc.integer({ min: 1, max: 65535 }).map(String)
      : fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 65535 }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 999999 }) }).map(String);
  const dnsName =
    MODE === 'clean'
      ? fc.oneof(fc.constantFrom('docker.example', 'h1', '10.0.0.5', 'localhost'), lowerName(12))
      : fc.oneof(
          fc.constantFrom('docker.example', 'h1', '10.0.0.5', '999.1.1.1', 'a..b', '-bad', 'x-', '01.2.3.4', `${'a'.repeat(64)}.com`, 'localhost'),
          lowerName(12),
        );

  const dockerArb = field(
    fc.oneof(
      fc.constant('unix:///var/run/docker.sock'),
      fc.tuple(dnsName, portText).map(([h, p]) => `tcp://${h}:${p}`),
      fc
        .tuple(dnsName, fc.option(portText, { nil: undefined }), fc.boolean())
        .map(([h, p, user]) => `ssh://${user ? 'deploy@' : ''}${h}${p !== undefined ? `:${p}` : ''}`),
    ),
    fc.constantFrom(
      'tcp://h:99999',
      'ssh://u@h:99999',
      'tcp://h',
      'http://h:1',
      'unix://relative',
      'tcp://:1',
      'ssh://',
      'tcp://h:0',
      'npipe:////./pipe/docker',
    ),
  );

  const octet =
    MODE === 'clean'
      ? fc.integer({ min: 0, max: 255 }).map(String)
      : fc.oneof(
          { weight: 5, arbitrary: fc.integer({ min: 0, max: 255 }).map(String) },
          { weight: 1, arbitrary: fc.constantFrom('256', '999', '01', '00', '-1', '') },
        );
  const ipv4Arb = fc.tuple(octet, octet, octet, octet).map((o) => o.join('.'));

  const hostArb: fc.Arbitrary<Tree> = fc.record(
    {
      name: hostNameArb,
      docker: dockerArb,
      network: field(lowerName(12), fc.constantFrom('', 'bad net', '-x')),
      publishAddress: field(ipv4Arb, fc.constantFrom('999.999.999.999', '1.2.3', '::1', 'localhost', '1.2.3.4.5')),
      maxInstances: intish(1, 20, -5, 20000),
    },
    { requiredKeys: ['name'] },
  ) as fc.Arbitrary<Tree>;

  /** A secret value as it may be written: quoted or not, referenced, from YAML features, or of a wrong type. */
  function secretValue(marker: string): fc.Arbitrary<Tree> {
    if (MODE === 'clean') {
      return fc.constantFrom<Tree>(
        marker,
        `p@ss: ${marker}`,
        `${marker} # not a comment`,
        `*${marker}`,
        `|${marker}`,
        `]${marker}`,
        `!${marker}`,
        `${marker}\nsecond line`,
        `\${${SECRET_VAR}}`,
        `postgres://app:\${${SECRET_VAR}}@db/app`,
        `\${${SECRET_VAR}:?must be set}`,
      );
    }
    return fc.oneof(
      { weight: 4, arbitrary: fc.constant(marker) },
      {
        weight: 2,
        arbitrary: fc.constantFrom(
          `p@ss: ${marker}`,
          `${marker} # not a comment`,
          `-${marker}`,
          `?${marker}`,
          `${marker}\nsecond line`,
          `"${marker}"`,
          ` ${marker} `,
          `${marker}\u0000nul`,
          `$${marker}`,
        ),
      },
      {
        weight: 3,
        arbitrary: fc.constantFrom(
          `\${${SECRET_VAR}}`,
          `postgres://app:\${${SECRET_VAR}}@db/app`,
          `\${${SECRET_VAR}:?must be set}`,
          `\${${SECRET_VAR}:-fallback}`,
          `$${SECRET_VAR}`,
          `\${${SECRET_VAR}`,
        ),
      },
      // Unquoted, starting with a character YAML reads as syntax (the parser's message may quote what follows).
      {
        weight: 4,
        arbitrary: fc
          .constantFrom(
            '*',
            '|',
            '>',
            ']',
            '}',
            '&',
            '!',
            '%',
            '@',
            '`',
            '{',
            '[',
            "'",
            '"',
            '? ',
            '- ',
            ': ',
            '#',
            ',',
            '|-',
            '>+',
            '!!',
            '!!binary ',
            '*a ',
            '&a ',
            '|2',
            '>9 ',
          )
          .map((c) => new Raw(`${c}${marker}`)),
      },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          new Raw(`|\n${marker}`),
          new Raw(`>-\n${marker}\n${marker}`),
          new Raw(`'${marker}`),
          new Raw(`"${marker}`),
          new Raw(`[${marker}`),
          new Raw(`{${marker}: 1`),
          new Raw(`${marker}: nested`),
        ),
      },
      { weight: 1, arbitrary: fc.constantFrom<Tree>([marker], { nested: marker }, [[marker]]) },
      { weight: 1, arbitrary: fc.oneof(fc.integer(), fc.boolean(), fc.constant(null)) },
    );
  }

  const envKeyArb =
    MODE === 'clean'
      ? fc.stringMatching(/^[A-Z_][A-Z0-9_]{0,15}$/)
      : fc.oneof(
          { weight: 10, arbitrary: fc.stringMatching(/^[A-Z_][A-Z0-9_]{0,15}$/) },
          {
            weight: 1,
            arbitrary: fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', '1BAD', 'BAD-KEY', 'bad key', '', 'X=Y', 'ÄÖ'),
          },
        );

  function envArb(marker: string): fc.Arbitrary<Tree> {
    return fc
      .array(
        fc.tuple(
          envKeyArb,
          fc.oneof(
            { weight: 1, arbitrary: secretValue(marker) },
            { weight: 1, arbitrary: fc.oneof(fc.constant('plain'), fc.integer({ min: 0, max: 9999 }).map(String), fc.boolean()) },
          ),
        ),
        { maxLength: 6 },
      )
      .map((pairs) => {
        const o: Record<string, Tree> = {};
        for (const [k, v] of pairs) Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
        return o;
      });
  }

  /** A dotenv file's text: secret values, sometimes a malformed line. */
  function envFileText(marker: string): fc.Arbitrary<string> {
    const line =
      MODE === 'clean'
        ? fc.stringMatching(/^[A-Z][A-Z0-9_]{0,8}$/).map((k) => `${k}=${marker}`)
        : fc.oneof(
            { weight: 5, arbitrary: fc.stringMatching(/^[A-Z][A-Z0-9_]{0,8}$/).map((k) => `${k}=${marker}`) },
            { weight: 2, arbitrary: fc.stringMatching(/^[A-Z][A-Z0-9_]{0,8}$/).map((k) => `export ${k}="${marker}"`) },
            { weight: 1, arbitrary: fc.constantFrom(`${marker}`, `1BAD=${marker}`, `BAD KEY=${marker}`, `# ${marker} in a comment`, '', `K='${marker}`) },
          );
    return fc.array(line, { maxLength: 5 }).map((ls) => `${ls.join('\n')}\n`);
  }

  const upstreamArb = field(
    fc.oneof({ weight: 5, arbitrary: ident(1, 20) }, { weight: 2, arbitrary: ident(21, 64) }),
    fc.constantFrom('', '1up', 'has-dash', 'a b', 'x'.repeat(65), 'up;}', 'up{'),
  );

  const stickyArb = pick(
    fc.constantFrom('remote_addr', 'cookie:session', 'cookie:my-session', 'header:X-User', 'cookie:s'),
    fc.oneof(
      fc.constant('remote_addr'),
      fc.stringMatching(/^[A-Za-z0-9_-]{1,24}$/).map((n) => `cookie:${n}`),
      fc.stringMatching(/^[A-Za-z0-9-]{1,24}$/).map((n) => `header:${n}`),
      fc.constantFrom('cookie:', 'header:a b', 'query:x', 'cookie:x;y', `cookie:${'a'.repeat(65)}`, 'cookie:sess-ion-id-with-many-dashes'),
    ),
  );
  const forceArb = pick(
    fc.constantFrom('header:X-Canary', 'cookie:canary', 'cookie:force-canary'),
    fc.oneof(
      fc.stringMatching(/^[A-Za-z0-9_-]{1,24}$/).map((n) => `cookie:${n}`),
      fc.stringMatching(/^[A-Za-z0-9-]{1,24}$/).map((n) => `header:${n}`),
      fc.constantFrom('remote_addr', 'header:', 'cookie:a=b'),
    ),
  );

  const canaryStepArb: fc.Arbitrary<Tree> =
    MODE === 'clean'
      ? fc.oneof(
          fc.integer({ min: 1, max: 99 }).map((w): Tree => ({ setWeight: w })),
          fc.constant<Tree>({ pause: { duration: '30s' } }),
          fc.constant<Tree>({ pause: {} }),
        )
      : fc.oneof(
          fc.integer({ min: -5, max: 105 }).map((w) => ({ setWeight: w })),
          fc.constantFrom<Tree>('30s', 5, '1h', '5m', 'soon', -1, 0, '0s', 'UNTIMED').map((d): Tree => ({ pause: d === 'UNTIMED' ? {} : { duration: d } })),
          fc.constant<Tree>({ analysis: {} }),
          fc.constantFrom<Tree>({ setWeight: 10, pause: {} }, {}, 'setWeight', null),
        );

  const strategyArb: fc.Arbitrary<Tree> = field(
    fc.oneof(
      fc.record(
        { type: fc.constant('RollingUpdate'), rollingUpdate: fc.record({ maxSurge: intOrPercentArb, maxUnavailable: intOrPercentArb }, { requiredKeys: [] }) },
        { requiredKeys: ['type'] },
      ),
      fc.constant({ type: 'Recreate' }),
      fc.record(
        {
          type: fc.constant('BlueGreen'),
          blueGreen: fc.record({ scaleDownDelaySeconds: secondsArb(600), previewUpstream: upstreamArb, autoPromote: fc.boolean() }, { requiredKeys: [] }),
        },
        { requiredKeys: ['type'] },
      ),
      fc.record(
        {
          type: fc.constant('Canary'),
          canary: fc.record(
            {
              steps: fc.array(canaryStepArb, { minLength: MODE === 'clean' ? 1 : 0, maxLength: 5 }),
              stickyKey: stickyArb,
              force: forceArb,
              canaryReplicas: intish(1, 5, -1, 20000),
            },
            { requiredKeys: MODE === 'clean' ? ['steps'] : [] },
          ),
          rollingUpdate: fc.record({ maxSurge: intOrPercentArb, maxUnavailable: intOrPercentArb }, { requiredKeys: [] }),
        },
        { requiredKeys: ['type'] },
      ),
    ),
    fc.constantFrom<Tree>({ type: 'Rolling' }, 'RollingUpdate', [], { type: 'Canary', canary: 'x' }, { rollingUpdate: { maxSurge: 0, maxUnavailable: 0 } }),
  );

  const hookArg =
    MODE === 'clean'
      ? fc.constantFrom('./check.sh', '--max-errors', '0', 'hello world', 'a\tb')
      : fc.oneof(
          { weight: 6, arbitrary: fc.constantFrom('./check.sh', '--max-errors', '0', 'echo', 'hello world', 'a\tb', 'line\nbreak') },
          { weight: 1, arbitrary: fc.constantFrom('nul\u0000byte', '\u001b[31mred', 'bell\u0007', '', 'del\u007f') },
        );
  const hookArb = field(fc.array(hookArg, { minLength: 1, maxLength: 4 }), fc.constantFrom<Tree>('./check.sh --all', [], [1, 2], null));

  /** Upstream templates: the default's shape with variations nginx accepts, and some deploy must refuse. */
  const templateArb: fc.Arbitrary<{ text: string; hasServers: boolean }> = fc
    .record({
      header: fc.constantFrom('', '# {{service}}: managed by fleetroll\n', '# {{unknown}} placeholder in a comment\n', '# service {{ service }}\n'),
      extra: fc.subarray(['    keepalive 16;', '    keepalive_timeout 30s;', '    keepalive_requests 1000;', '    # a comment inside', '    least_conn;'], {
        maxLength: 2,
      }),
      servers: pick(
        fc.constantFrom('{{servers}}', '{{ servers }}', '{{servers }}', '{{  servers}}'),
        fc.constantFrom('{{servers}}', '{{ servers }}', 'NONE', '{servers}', '{{Servers}}'),
      ),
      serversFirst: fc.boolean(),
      blocks: fc.constantFrom('{{blocks}}\n', '{{ blocks }}\n', '', '# blocks go here: {{blocks}}\n'),
      crlf: fc.oneof({ weight: 5, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
      trailingNewline: fc.boolean(),
    })
    .map((t) => {
      const serversLine = t.servers === 'NONE' ? '    # no servers placeholder' : t.servers;
      const inner = t.serversFirst ? [serversLine, ...t.extra] : [...t.extra, serversLine];
      // Text after {{blocks}} on its line would be a comment only if the line is one: keep the forms nginx reads.
      const blocks = t.blocks.startsWith('#') ? '{{blocks}}\n' : t.blocks;
      let text = `${t.header}upstream {{upstream}} {\n${inner.join('\n')}\n}\n${blocks}`;
      if (!t.trailingNewline) text = text.replace(/\n$/, '');
      if (t.crlf) text = text.replace(/\n/g, '\r\n');
      return { text, hasServers: /\{\{\s*servers\s*\}\}/.test(text) };
    });

  /** A fleet file, with the templates, env files, secret files and defaults file it points at. */
  function fleetCaseArb(marker: string): fc.Arbitrary<FileCase> {
    const lbArb = fc.record(
      {
        mode: pick(fc.constantFrom('exec', 'container'), fc.constantFrom('exec', 'container', 'both', 'neither')),
        upstreamFile: field(
          fc.constantFrom('/etc/nginx/conf.d/upstream.conf', '/etc/nginx/up2.conf', '/tmp/x.conf'),
          fc.constantFrom('relative.conf', '/etc/nginx/with space.conf', ''),
        ),
        upstream: upstreamArb,
        template: fc.oneof(
          { weight: 3, arbitrary: fc.constant(undefined) },
          { weight: 4, arbitrary: templateArb },
          { weight: MODE === 'clean' ? 0 : 1, arbitrary: fc.constantFrom('./missing.tmpl', '.', '') },
        ),
        accessLog: fc.option(
          pick(
            fc.constantFrom('/var/log/nginx/fleetroll.log'),
            fc.constantFrom('/var/log/nginx/fleetroll.log', 'stdout', '/dev/stdout', '/proc/self/fd/1', 'relative.log'),
          ),
          { nil: undefined },
        ),
      },
      { requiredKeys: ['mode', 'upstreamFile', 'upstream'] },
    );
    return fc
      .record(
        {
          service: serviceArb,
          image: imageArb,
          replicas: intish(0, 12, -3, 20000),
          port: intish(1, 65535, -1, 70000),
          version: fc.option(field(fc.stringMatching(/^[0-9]\.[0-9]\.[0-9]{1,3}$/), fc.constantFrom('', ' 1.0', '-x', 'v/1')), { nil: undefined }),
          env: fc.option(envArb(marker), { nil: undefined }),
          envFile: fc.option(
            fc.oneof(
              envFileText(marker).map((t) => ({ text: t })),
              fc.constant({ missing: true }),
            ),
            { nil: undefined },
          ),
          // Its password is a secret (config/images.ts): accepted or refused, never printed.
          registry: fc.option(fc.record({ server: fc.constant('registry.example:5000'), username: fc.constant('ci'), password: secretValue(marker) }), {
            nil: undefined,
            freq: 4,
          }),
          secretFile: fc.option(fc.constant(true), { nil: undefined, freq: 6 }),
          hosts: fc.option(
            MODE === 'clean'
              ? fc.uniqueArray(hostArb, { minLength: 1, maxLength: 3, selector: (h) => (h as { name?: unknown }).name })
              : fc.array(hostArb, { maxLength: 3 }),
            { nil: undefined },
          ),
          strategy: fc.option(strategyArb, { nil: undefined }),
          timings: fc.record(
            {
              minReadySeconds: secondsArb(30),
              progressDeadlineSeconds: secondsArb(900, 1),
              drainSeconds: secondsArb(10),
              terminationGracePeriodSeconds: secondsArb(60),
              revisionHistoryLimit: intish(0, 20, -1, 5000),
              hostParallelism: intish(1, 16, 0, 2000),
            },
            { requiredKeys: [] },
          ),
          hooks: fc.option(
            fc.record(
              { preDeploy: hookArb, postWave: hookArb, postDeploy: hookArb, prePromotion: hookArb, timeoutSeconds: secondsArb(120, 1) },
              { requiredKeys: [] },
            ),
            { nil: undefined },
          ),
          loadBalancers: fc.array(lbArb, { maxLength: 3 }),
          extra: fc.option(
            MODE === 'clean'
              ? fc.constantFrom<Record<string, Tree>>(
                  { command: ['node', 'server.mjs'] },
                  { labels: { team: 'books' } },
                  { resources: { memory: '256m', cpus: 0.5 } },
                  { restart: 'on-failure:3' },
                  { onFailure: 'rollback' },
                  { group: true },
                  { replacementPolicy: 'TerminationComplete' },
                )
              : fc.constantFrom<Record<string, Tree>>(
                  { command: ['node', 'server.mjs'] },
                  { command: 'node "server.mjs' },
                  { labels: { team: 'books', 'fleetroll.revision': 'x' } },
                  { volumes: ['./data:/data:ro', 'named:/var/lib/app'] },
                  { resources: { memory: '256m', cpus: 0.5 } },
                  { restart: 'on-failure:3' },
                  { unknownField: 1 },
                  { onFailure: 'rollback' },
                  { analysis: { interval: '10s', minRequests: 50, maxErrorRate: '1%' } },
                  { group: true },
                  { replacementPolicy: 'TerminationComplete' },
                  { probes: { readiness: { path: 'no-slash' } } },
                ),
            { nil: undefined },
          ),
          defaults: fc.option(
            fc.oneof(
              defaultsTreeArb.map((t) => ({ inline: t })),
              defaultsDocArb.map((d) => ({ file: d })),
              ...(MODE === 'clean' ? [] : [fc.constant({ missing: true })]),
            ),
            { nil: undefined, freq: 4 },
          ),
          style: docStyle,
        },
        { requiredKeys: ['service', 'image', 'replicas', 'port', 'timings', 'loadBalancers', 'style'] },
      )
      .map((g) => {
        const files: Record<string, string> = {};
        const tree: Record<string, Tree> = { service: g.service, image: g.image, replicas: g.replicas, port: g.port };
        if (g.version !== undefined) tree.version = g.version;
        if (g.env !== undefined) tree.env = g.env;
        if (g.envFile !== undefined) {
          tree.envFile = './api.env';
          if ('text' in g.envFile) files['api.env'] = g.envFile.text;
        }
        if (g.registry !== undefined) tree.registry = g.registry;
        if (g.secretFile) {
          tree.secretFiles = { db: { file: './db.secret' } };
          tree.secrets = ['db'];
          files['db.secret'] = `${marker}\n`;
        }
        if (g.hosts !== undefined) tree.hosts = g.hosts;
        if (g.strategy !== undefined) tree.strategy = g.strategy;
        Object.assign(tree, g.timings);
        if (g.hooks !== undefined) tree.hooks = g.hooks;
        if (g.extra !== undefined) Object.assign(tree, g.extra);
        if (g.defaults !== undefined) {
          if ('inline' in g.defaults) tree.defaults = g.defaults.inline;
          else if ('file' in g.defaults) {
            tree.defaults = './defaults.yaml';
            files['defaults.yaml'] = g.defaults.file;
          } else tree.defaults = './no-defaults.yaml';
        }
        tree.loadBalancers = g.loadBalancers.map((lb, i) => {
          const nginx: Record<string, Tree> = { upstreamFile: lb.upstreamFile, upstream: lb.upstream };
          if (lb.mode === 'exec' || lb.mode === 'both') nginx.exec = true;
          if (lb.mode === 'container' || lb.mode === 'both') nginx.container = `nginx-${i}`;
          if (lb.template !== undefined) {
            if (typeof lb.template === 'string') nginx.template = lb.template;
            else {
              nginx.template = `./t${i}.tmpl`;
              files[`t${i}.tmpl`] = lb.template.text;
            }
          }
          if (lb.accessLog !== undefined) nginx.accessLog = lb.accessLog;
          return { nginx };
        });
        files['fleet.yaml'] = serialize(tree, g.style);
        return { files, main: 'fleet.yaml', what: 'fleet file' };
      });
  }

  /** What a defaults file (or an inline `defaults:`) may hold, and wrong things. */
  const defaultsTreeArb: fc.Arbitrary<Tree> = fc
    .record(
      {
        strategy: strategyArb,
        minReadySeconds: secondsArb(30),
        progressDeadlineSeconds: secondsArb(900, 1),
        drainSeconds: secondsArb(10),
        terminationGracePeriodSeconds: secondsArb(60),
        revisionHistoryLimit: intish(0, 20, -1, 5000),
        hostParallelism: intish(1, 16, 0, 2000),
        replacementPolicy: field(fc.constantFrom('TerminationStarted', 'TerminationComplete'), fc.constantFrom('Never', '', 1)),
        junk: fc.constantFrom<Tree>({ service: 'not-allowed-here' }, { replicas: 3 }, { defaults: './itself.yaml' }),
      },
      { requiredKeys: [] },
    )
    .map((r) => {
      const { junk, ...rest } = r as Record<string, Tree>;
      return MODE === 'noisy' && junk !== undefined && typeof junk === 'object' && !Array.isArray(junk) && !(junk instanceof Raw) && junk !== null
        ? { ...rest, ...junk }
        : rest;
    });

  const defaultsDocArb: fc.Arbitrary<string> = fc.oneof(
    { weight: 8, arbitrary: fc.tuple(defaultsTreeArb, docStyle).map(([t, s]) => serialize(t, s)) },
    {
      weight: MODE === 'clean' ? 0 : 1,
      arbitrary: fc.constantFrom(
        '',
        '[]\n',
        '- a\n',
        'just a string\n',
        '42\n',
        'strategy: *nope\n',
        'a: &x [*x]\n',
        '{',
        'strategy: !!omap [type: Recreate]\n',
      ),
    },
  );

  /** A valid fleet file that points at `./defaults.yaml`, with a generated defaults file. */
  const defaultsCaseArb: fc.Arbitrary<FileCase> = fc.tuple(defaultsDocArb, fc.boolean(), ident(1, 20)).map(([doc, ownStrategy, upstream]) => ({
    files: {
      // With a load balancer, so a strategy taken from the defaults (a canary's sticky key, say) reaches the rendered upstream.
      'fleet.yaml': `service: fuzz-defaults\nimage: app:1.0.0\nreplicas: 4\nport: 8080\ndefaults: ./defaults.yaml\n${ownStrategy ? 'strategy: { type: Recreate }\n' : ''}loadBalancers:\n  - nginx: { exec: true, upstreamFile: /etc/nginx/u.conf, upstream: d_${upstream} }\n`,
      'defaults.yaml': doc,
    },
    main: 'fleet.yaml',
    what: 'defaults file',
  }));

  /** A valid fleet whose one or two load balancers use generated templates. */
  const templateCaseArb: fc.Arbitrary<FileCase> = fc
    .tuple(
      fc.array(templateArb, { minLength: 1, maxLength: 2 }),
      fc.constantFrom('RollingUpdate', 'BlueGreen', 'Canary-cookie', 'Canary-force'),
      ident(1, 30),
      fc.constantFrom('session', 'my-session', 'x'),
    )
    .map(([templates, strategy, upstream, cookie]) => {
      const files: Record<string, string> = {};
      const lbs = templates.map((t, i) => {
        files[`t${i}.tmpl`] = t.text;
        return `  - nginx: { exec: true, upstreamFile: /etc/nginx/u${i}.conf, upstream: ${upstream}${i}, template: ./t${i}.tmpl }\n`;
      });
      const strategies: Record<string, string> = {
        RollingUpdate: 'strategy: { type: RollingUpdate }\n',
        BlueGreen: `strategy: { type: BlueGreen, blueGreen: { previewUpstream: preview_${upstream} } }\n`,
        'Canary-cookie': `strategy: { type: Canary, canary: { stickyKey: "cookie:${cookie}", steps: [ { setWeight: 20 } ] } }\n`,
        'Canary-force': `strategy: { type: Canary, canary: { stickyKey: "header:X-User", force: "cookie:${cookie}", steps: [ { setWeight: 50 } ] } }\n`,
      };
      files['fleet.yaml'] = `service: fuzz-templates\nimage: app:1.0.0\nreplicas: 3\nport: 8080\n${strategies[strategy]}loadBalancers:\n${lbs.join('')}`;
      return { files, main: 'fleet.yaml', what: 'upstream template' };
    });

  const oneOrList = <T extends Tree>(a: fc.Arbitrary<T>, maxLength: number) =>
    fc.oneof(
      a as fc.Arbitrary<Tree>,
      fc.array(a, { minLength: MODE === 'clean' ? 1 : 0, maxLength: MODE === 'clean' ? Math.min(maxLength, 2) : maxLength }) as fc.Arbitrary<Tree>,
    );
  const range = (lo: number, hi: number) => (MODE === 'clean' ? fc.integer({ min: lo, max: hi }) : fc.integer({ min: lo - 1, max: hi + 1 }));

  const experimentStrategyArb: fc.Arbitrary<Tree> = fc.oneof(
    fc.record(
      { type: fc.constant('RollingUpdate'), maxSurge: intOrPercentArb, maxUnavailable: intOrPercentArb, expectZeroFailures: fc.boolean() },
      { requiredKeys: ['type'] },
    ),
    fc.record({ type: fc.constant('naive'), intervalSeconds: secondsArb(60) }, { requiredKeys: ['type'] }),
    fc.record({ type: fc.constant('script'), batch: intish(1, 20, 0, 100), pollSeconds: secondsArb(60) }, { requiredKeys: ['type'] }),
    fc.record(
      {
        type: fc.constant('BlueGreen'),
        blueGreen: pick(
          fc.constantFrom<Tree>({}, { scaleDownDelaySeconds: 5 }),
          fc.constantFrom<Tree>({}, { scaleDownDelaySeconds: 5 }, { preview: { upstream: 'x' } }, { autoPromote: false }),
        ),
      },
      { requiredKeys: ['type'] },
    ),
    MODE === 'clean'
      ? fc.record(
          {
            type: fc.constant('Canary'),
            canary: fc.record(
              { steps: fc.array(canaryStepArb, { minLength: 1, maxLength: 4 }), canaryReplicas: fc.integer({ min: 1, max: 3 }) },
              { requiredKeys: ['steps'] },
            ),
          },
          { requiredKeys: ['type', 'canary'] },
        )
      : fc.record(
          {
            type: fc.constant('Canary'),
            canary: fc.record(
              { steps: fc.array(canaryStepArb, { maxLength: 4 }), canaryReplicas: intish(1, 20, 0, 100), stickyKey: stickyArb },
              { requiredKeys: [] },
            ),
            analysis: fc.constantFrom<Tree>(true, false, { maxErrorRate: '5%' }),
          },
          { requiredKeys: ['type'] },
        ),
    pick(
      fc.constantFrom<Tree>({ type: 'Recreate' }),
      fc.constantFrom<Tree>({ type: 'Recreate' }, { type: 'warp' }, { name: 'x'.repeat(41) }, {}, 'RollingUpdate', null),
    ),
  );

  /** Experiment specs: matrices from one cell to far past the cap, strategies of every kind. */
  const experimentCaseArb: fc.Arbitrary<FileCase> = fc
    .record(
      {
        name: field(lowerName(20), fc.constantFrom('', 'Upper', 'x'.repeat(41))),
        from: pick(fc.constant('1.0.0'), fc.constantFrom('1.0.0', '1.0.0', 'bad version')),
        repetitions: intish(1, 5, 0, 100),
        fleet: fc.record(
          { replicas: oneOrList(range(1, 20), 14), drainSeconds: oneOrList(range(0, 60), 14), warmupSeconds: oneOrList(range(0, 5), 14) },
          { requiredKeys: [] },
        ),
        load: fc.record(
          {
            getPerSecond: oneOrList(range(0, 2000), 14),
            postConcurrency: oneOrList(range(0, 64), 6),
            keepAlive: oneOrList(fc.boolean(), 3),
            users: intish(1, 1000, 0, 200000),
          },
          { requiredKeys: [] },
        ),
        strategies: fc.array(experimentStrategyArb, { minLength: MODE === 'clean' ? 1 : 0, maxLength: MODE === 'clean' ? 4 : 22 }),
        analysis: fc.option(
          pick(
            fc.constantFrom<Tree>({ interval: '5s', minRequests: 20, maxErrorRate: '2%' }),
            fc.constantFrom<Tree>({ interval: '5s', minRequests: 20, maxErrorRate: '2%' }, { maxErrorRate: 'lots' }, {}),
          ),
          { nil: undefined },
        ),
        badVersion: fc.option(
          fc.record(
            {
              errorRate: oneOrList(pick(fc.constantFrom<Tree>('20%', 0.5), fc.constantFrom<Tree>('20%', 0.5, 2, '150%', 'x')), 4),
              latencyMs: oneOrList(range(0, 10000), 4),
            },
            { requiredKeys: [] },
          ),
          { nil: undefined },
        ),
        records: fc.option(
          pick(
            fc.constantFrom<Tree>(['ndjson'], ['csv', 'ndjson']),
            fc.constantFrom<Tree>(['ndjson'], ['csv', 'ndjson'], ['ndjson', 'csv', 'ndjson'], ['xml'], []),
          ),
          { nil: undefined },
        ),
        style: docStyle,
      },
      { requiredKeys: ['name', 'strategies', 'style'] },
    )
    .map((g) => {
      const { style, ...tree } = g;
      return { files: { 'spec.yaml': serialize(tree as Tree, style) }, main: 'spec.yaml', what: 'experiment spec' };
    });

  return { secretValue, templateArb, fleetCaseArb, defaultsCaseArb, templateCaseArb, experimentCaseArb };
}

/** Each mode's generators on their own (the exports below mix the two half and half). */
export const clean = build('clean');
export const noisy = build('noisy');
const both = <T>(c: fc.Arbitrary<T>, n: fc.Arbitrary<T>) => fc.oneof(c, n);

export const secretValue = (marker: string) => both(clean.secretValue(marker), noisy.secretValue(marker));
export const templateArb = both(clean.templateArb, noisy.templateArb);
export const fleetCaseArb = (marker: string) => both(clean.fleetCaseArb(marker), noisy.fleetCaseArb(marker));
export const defaultsCaseArb = both(clean.defaultsCaseArb, noisy.defaultsCaseArb);
export const templateCaseArb = both(clean.templateCaseArb, noisy.templateCaseArb);
export const experimentCaseArb = both(clean.experimentCaseArb, noisy.experimentCaseArb);
