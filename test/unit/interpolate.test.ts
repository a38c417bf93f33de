/**
 * Interpolation and the env-file format, row by row from compose-spec's own
 * documented cases (12-interpolation.md; 05-services.md "Env_file format")
 * and compose-go's template behaviour where the spec is silent.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { interpolateString, interpolateTree, parseDotenv } from '../../src/config/interpolate.js';
import { ValidationError } from '../../src/errors.js';

const ENV: Record<string, string> = { SET: 'value', EMPTY: '', FOO: 'foo', SECRET: 's3cr3t-pa55' };
const lookup = (k: string): string | undefined => ENV[k];

function issuesOf(f: () => unknown): { path: string; message: string }[] {
  try {
    f();
  } catch (err) {
    assert.ok(err instanceof ValidationError, String(err));
    assert.equal(err.exitCode, 2);
    return [...err.issues];
  }
  assert.fail('expected a ValidationError');
}

describe('interpolateString: compose-spec cases', () => {
  const rows: [string, string, string, string[]][] = [
    ['braced', '${SET}', 'value', ['SET']],
    ['unbraced', '$SET', 'value', ['SET']],
    ['unbraced ends at a non-name character', '$SET.x/$FOO', 'value.x/foo', ['SET', 'FOO']],
    ['unset is blank', 'a${UNSET}b', 'ab', ['UNSET']],
    [':- unset takes the default', '${UNSET:-default}', 'default', ['UNSET']],
    [':- empty takes the default', '${EMPTY:-default}', 'default', ['EMPTY']],
    [':- set keeps the value', '${SET:-default}', 'value', ['SET']],
    ['- unset takes the default', '${UNSET-default}', 'default', ['UNSET']],
    ['- empty keeps the empty value', '${EMPTY-default}', '', ['EMPTY']],
    [':? set passes', '${SET:?need it}', 'value', ['SET']],
    ['? empty passes (only unset fails)', '${EMPTY?need it}', '', ['EMPTY']],
    [':+ set and non-empty takes the replacement', '${SET:+yes}', 'yes', ['SET']],
    [':+ empty stays empty', '${EMPTY:+yes}', '', ['EMPTY']],
    ['+ empty (set) takes the replacement', '${EMPTY+yes}', 'yes', ['EMPTY']],
    ['+ unset is blank', '${UNSET+yes}', '', ['UNSET']],
    ['nested ${VARIABLE:-${FOO}}', '${UNSET:-${FOO}}', 'foo', ['UNSET', 'FOO']],
    ['nested ${VARIABLE:-${FOO:-default}}', '${UNSET:-${ALSO_UNSET:-default}}', 'default', ['UNSET', 'ALSO_UNSET']],
    ['nested ${VARIABLE?$FOO} when set', '${SET?$FOO}', 'value', ['SET']],
    ['an unused default does not count as used', '${SET:-${FOO}}', 'value', ['SET']],
    ['$$ is a literal dollar', '$$VAR_NOT_INTERPOLATED_BY_COMPOSE', '$VAR_NOT_INTERPOLATED_BY_COMPOSE', []],
    ['$${X} is literal too', 'a$${SET}', 'a${SET}', []],
    ['$ before a digit stays', 'costs $5', 'costs $5', []],
    ['a lone $ stays', 'a $ b $', 'a $ b $', []],
    ['default with spaces and colons', '${UNSET:-http://x:1/a b}', 'http://x:1/a b', ['UNSET']],
    ['default containing $$', '${UNSET:-$$HOME}', '$HOME', ['UNSET']],
    ['names are case-insensitive in syntax, exact in lookup', '${set:-lower}', 'lower', ['set']],
    ['no $ at all', 'plain text', 'plain text', []],
  ];
  for (const [name, text, value, variables] of rows) {
    it(name, () => {
      assert.deepEqual(interpolateString(text, lookup, 'p'), { value, variables });
    });
  }
});

describe('interpolateString: errors', () => {
  const rows: [string, string, RegExp][] = [
    [':? unset', '${UNSET:?set it in .env}', /^variable UNSET is required: set it in \.env$/],
    [':? empty', '${EMPTY:?must not be empty}', /^variable EMPTY is required: must not be empty$/],
    ['? unset', '${UNSET?no}', /^variable UNSET is required: no$/],
    ['? unset without a message', '${UNSET?}', /^variable UNSET is required$/],
    ['required inside a taken default', '${UNSET:-${ALSO:?inner}}', /^variable ALSO is required: inner$/],
    ['unclosed ${', 'x ${SET', /^unclosed \$\{/],
    ['unclosed ${ after an operator', '${SET:-abc', /^unclosed \$\{/],
    ['unclosed ${ at the end', 'x ${', /^unclosed \$\{/],
    ['empty name', '${}', /^invalid variable name/],
    ['name starting with a digit', '${1X}', /^invalid variable name/],
    ['a space in the name', '${FOO BAR}', /^invalid interpolation \$\{FOO .*forms are/],
    ['unsupported ${VARIABLE/foo/bar}', '${FOO/foo/bar}', /^invalid interpolation \$\{FOO\/\.\.\.\}/],
  ];
  for (const [name, text, message] of rows) {
    it(name, () => {
      const issues = issuesOf(() => interpolateString(text, lookup, 'services/api/environment/X'));
      assert.equal(issues.length, 1);
      assert.equal(issues[0]!.path, 'services/api/environment/X');
      assert.match(issues[0]!.message, message);
    });
  }

  it('never puts a value in a message, even a message naming another variable', () => {
    const issues = issuesOf(() => interpolateString('${SECRET}${UNSET:?got $SECRET}', lookup, 'p'));
    assert.doesNotMatch(issues[0]!.message, /s3cr3t/);
    assert.match(issues[0]!.message, /got \$SECRET/);
  });
});

describe('interpolateTree', () => {
  it('interpolates values, not keys, and maps each path to its variables', () => {
    const r = interpolateTree(
      { services: { api: { image: 'app:${TAG:-1.0}', labels: { $KEY: '$FOO' }, ports: ['${PORT:-8080}', 80], read_only: true } } },
      lookup,
    );
    assert.deepEqual(r.value, { services: { api: { image: 'app:1.0', labels: { $KEY: 'foo' }, ports: ['8080', 80], read_only: true } } });
    assert.deepEqual(
      [...r.variables],
      [
        ['services/api/image', ['TAG']],
        ['services/api/labels/$KEY', ['FOO']],
        ['services/api/ports/0', ['PORT']],
      ],
    );
  });

  it('collects every problem into one ValidationError', () => {
    const issues = issuesOf(() => interpolateTree({ a: '${X:?one}', b: ['ok', '${'], c: { d: '${Y?two}' } }, lookup, 'root'));
    assert.deepEqual(
      issues.map((i) => i.path),
      ['root/a', 'root/b/1', 'root/c/d'],
    );
  });

  it('leaves non-strings alone', () => {
    assert.deepEqual(interpolateTree([1, null, false, { n: 2 }], lookup).value, [1, null, false, { n: 2 }]);
  });
});

describe('parseDotenv: compose-spec "Env_file format" cases', () => {
  const rows: [string, string, Record<string, string>][] = [
    ['VAR=VAL', 'VAR=VAL', { VAR: 'VAL' }],
    ['VAR="VAL"', 'VAR="VAL"', { VAR: 'VAL' }],
    ["VAR='VAL'", "VAR='VAL'", { VAR: 'VAL' }],
    ['inline comment after a space', 'VAR=VAL # comment', { VAR: 'VAL' }],
    ['# without a space is not a comment', 'VAR=VAL# not a comment', { VAR: 'VAL# not a comment' }],
    ['# inside double quotes', 'VAR="VAL # not a comment"', { VAR: 'VAL # not a comment' }],
    ['comment after the closing quote', 'VAR="VAL" # comment', { VAR: 'VAL' }],
    ["single quotes are literal: '$OTHER'", "VAR='$OTHER'", { VAR: '$OTHER' }],
    ["single quotes are literal: '${OTHER}'", "VAR='${OTHER}'", { VAR: '${OTHER}' }],
    ['escaped single quote', "VAR='Let\\'s go!'", { VAR: "Let's go!" }],
    ['escaped double quotes (JSON)', 'VAR="{\\"hello\\": \\"json\\"}"', { VAR: '{"hello": "json"}' }],
    ['\\t in double quotes', 'VAR="some\\tvalue"', { VAR: 'some\tvalue' }],
    ['\\n and \\\\ in double quotes', 'VAR="a\\nb\\\\c"', { VAR: 'a\nb\\c' }],
    ['\\t in single quotes stays', "VAR='some\\tvalue'", { VAR: 'some\\tvalue' }],
    ['\\t unquoted stays', 'VAR=some\\tvalue', { VAR: 'some\\tvalue' }],
    ['empty value', 'VAR=', { VAR: '' }],
    ['bare VAR is unset', 'VAR', {}],
    ['export prefix', 'export VAR=VAL', { VAR: 'VAL' }],
    [
      'comments and blank lines',
      '# Set Rails/Rack environment\n\nRACK_ENV=development\n  # indented comment\nVAR="quoted"\n',
      { RACK_ENV: 'development', VAR: 'quoted' },
    ],
    ['yaml-style KEY: value', 'KEY: value', { KEY: 'value' }],
    ['spaces around =', 'KEY = value  ', { KEY: 'value' }],
    ['= inside the value', 'URL=postgres://u@h/db?sslmode=require', { URL: 'postgres://u@h/db?sslmode=require' }],
    ['multi-line double-quoted value', 'CERT="line1\nline2"\nNEXT=1', { CERT: 'line1\nline2', NEXT: '1' }],
    ['CRLF line ends', 'A=1\r\nB=2\r\n', { A: '1', B: '2' }],
    ['UTF-8 BOM', '\uFEFFA=1', { A: '1' }],
    ['later wins', 'A=1\nA=2', { A: '2' }],
    ['without lookup ${X} is kept as written', 'A=${SET}', { A: '${SET}' }],
  ];
  for (const [name, text, expected] of rows) {
    it(name, () => assert.deepEqual(parseDotenv(text, 'app.env'), expected));
  }

  it('with a lookup, unquoted and double-quoted values are interpolated; single-quoted are not; earlier keys come first', () => {
    const r = parseDotenv('A=${SET}\nB="${FOO}-\\$x"\nC=\'${SET}\'\nD=${A}-${UNSET:-d}\nSET=shadow\nE=$SET', '.env', lookup);
    assert.deepEqual(r, { A: 'value', B: 'foo-$x', C: '${SET}', D: 'value-d', SET: 'shadow', E: 'shadow' });
  });

  const bad: [string, string, string, RegExp][] = [
    ['a space in the key', 'A=1\nMY KEY=zq9secret', 'app.env: line 2', /key has only letters/],
    ['no key', '=zq9secret', 'app.env: line 1', /the key is missing/],
    ['an unclosed double quote', 'A="zq9secret\nB=1', 'app.env: line 1', /double-quoted value of A is not closed/],
    ['text after the closing quote', "A='zq9secret' zq9secret", 'app.env: line 1', /after the closing quote/],
    ['a bad character in the key', 'A$B=zq9secret', 'app.env: line 1', /key has only letters/],
  ];
  for (const [name, text, path, message] of bad) {
    it(`rejects ${name}, naming the line, never the value`, () => {
      const issues = issuesOf(() => parseDotenv(text, 'app.env'));
      assert.equal(issues[0]!.path, path);
      assert.match(issues[0]!.message, message);
      assert.doesNotMatch(issues[0]!.message, /zq9secret/);
    });
  }

  it('a required variable in a value fails with the line', () => {
    const issues = issuesOf(() => parseDotenv('\nA=${UNSET:?set UNSET}', '.env', lookup));
    assert.deepEqual(issues, [{ path: '.env: line 2', message: 'variable UNSET is required: set UNSET' }]);
  });
});
