/**
 * Report plumbing: number formatting, the Markdown/HTML renderings of one
 * document, the CSV and NDJSON recordings, and that the chart specs render
 * to SVG through Vega-Lite + Vega headless.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderSvg, versionsPerSecondSpec, windowDurationSpec } from '../../src/experiment/charts.js';
import { toHtml, toMarkdown, type Block } from '../../src/experiment/document.js';
import { eventLines, recordsToCsv, toNdjson } from '../../src/experiment/experiment.js';
import { perSecond, type RequestRecord } from '../../src/experiment/metrics.js';
import { fmtStat } from '../../src/experiment/report.js';

describe('fmtStat', () => {
  const rows: { name: string; args: Parameters<typeof fmtStat>; want: string }[] = [
    { name: 'missing', args: [null], want: 'n/a' },
    { name: 'one run: just the value', args: [{ median: 3, min: 3, max: 3, n: 1 }], want: '3' },
    { name: 'spread: median (min–max)', args: [{ median: 2, min: 0, max: 5, n: 3 }], want: '2 (0–5)' },
    { name: 'ms as seconds with one decimal', args: [{ median: 9640, min: 9100, max: 10230, n: 3 }, 1000, 1], want: '9.6 (9.1–10.2)' },
    { name: 'a spread that vanishes when rounded is not shown', args: [{ median: 212, min: 205, max: 230, n: 3 }, 1000, 1], want: '0.2' },
    { name: 'with decimals asked for, always that many', args: [{ median: 2.5, min: 1, max: 4, n: 4 }, 1, 1], want: '2.5 (1.0–4.0)' },
    { name: 'a count median between two runs keeps its half', args: [{ median: 0.5, min: 0, max: 1, n: 2 }], want: '0.5 (0–1)' },
  ];
  for (const row of rows) it(row.name, () => assert.equal(fmtStat(...row.args), row.want));
});

describe('document: the same blocks as Markdown and HTML', () => {
  const blocks: Block[] = [
    { kind: 'h1', text: 'Experiment: a <b> test' },
    { kind: 'p', text: 'uses `code` and **bold**' },
    { kind: 'table', head: ['config', 'failed'], align: ['l', 'r'], rows: [['naive | control', '2']] },
    { kind: 'img', src: 'charts/x.svg', alt: 'a chart' },
  ];
  it('Markdown: headings, escaped pipes in cells, right-aligned columns, images', () => {
    assert.equal(
      toMarkdown(blocks),
      '# Experiment: a <b> test\n\nuses `code` and **bold**\n\n| config | failed |\n| --- | ---: |\n| naive \\| control | 2 |\n\n![a chart](charts/x.svg)\n',
    );
  });
  it('HTML: escaped text, inline code and bold, table cells, images', () => {
    const html = toHtml('t', blocks);
    assert.match(html, /<h1>Experiment: a &lt;b&gt; test<\/h1>/);
    assert.match(html, /<p>uses <code>code<\/code> and <strong>bold<\/strong><\/p>/);
    assert.match(html, /<td>naive \| control<\/td><td class="r">2<\/td>/);
    assert.match(html, /<img src="charts\/x.svg" alt="a chart">/);
    assert.match(html, /^<!doctype html>/);
  });
});

describe('recordings', () => {
  const records: RequestRecord[] = [
    { t: 0.5, method: 'GET', path: '/api/books', latencyMs: 3.2, status: 200, version: '1.0.0' },
    { t: 12, method: 'POST', path: '/api/orders', latencyMs: 4, error: 'socket hang up, "really"' },
    { t: 20, method: 'GET', path: '/api/books', latencyMs: 30, status: 200, version: '1.1.0', retried: true, retryError: 'ECONNRESET' },
  ];
  it('CSV: one header, one row per request, quoting where needed', () => {
    assert.equal(
      recordsToCsv(records),
      't,method,path,status,error,latencyMs,version,retried,retryError\n' +
        '0.5,GET,/api/books,200,,3.2,1.0.0,,\n' +
        '12,POST,/api/orders,,"socket hang up, ""really""",4,,,\n' +
        '20,GET,/api/books,200,,30,1.1.0,true,ECONNRESET\n',
    );
  });
  it('NDJSON: one JSON object per line; events flattened with their time and source', () => {
    assert.equal(toNdjson([]), '');
    assert.equal(toNdjson(records.slice(0, 1)), '{"t":0.5,"method":"GET","path":"/api/books","latencyMs":3.2,"status":200,"version":"1.0.0"}\n');
    assert.deepEqual(eventLines([{ t: 1.23456, source: 'engine', event: { type: 'ready', name: 'n1' } }]), [{ t: 1.235, source: 'engine', type: 'ready', name: 'n1' }]);
  });
});

describe('charts render to SVG with Vega-Lite + Vega, headless', () => {
  it('versions per second: a stacked bar per second, the versions in the legend', async () => {
    const records: RequestRecord[] = [
      { t: 100, method: 'GET', path: '/', latencyMs: 1, status: 200, version: '1.0.0' },
      { t: 1100, method: 'GET', path: '/', latencyMs: 1, status: 200, version: '1.1.0' },
      { t: 1200, method: 'GET', path: '/', latencyMs: 1, status: 502 },
    ];
    const svg = await renderSvg(versionsPerSecondSpec({ title: 'run 1', from: '1.0.0', to: '1.1.0', buckets: perSecond(records), deployStartMs: 500, deployEndMs: 1500 }));
    assert.match(svg, /^<svg/);
    for (const text of ['run 1', '1.0.0', '1.1.0', 'failed', 'deploy starts', 'seconds since the probes started']) assert.ok(svg.includes(text), text);
  });
  it('window and duration: measured beside predicted, one panel per metric', async () => {
    const svg = await renderSvg(
      windowDurationSpec(
        [
          { cell: 'batch 1', metric: 'mixed-version window', kind: 'measured', value: 30, min: 29, max: 31 },
          { cell: 'batch 1', metric: 'mixed-version window', kind: 'predicted by simulate', value: 28 },
          { cell: 'batch 1', metric: 'deploy duration', kind: 'measured', value: 40, min: 39, max: 41 },
        ],
        'exp',
        ['batch 1'],
      ),
    );
    for (const text of ['mixed-version window', 'deploy duration', 'batch 1', 'predicted by simulate']) assert.ok(svg.includes(text), text);
  });
});
