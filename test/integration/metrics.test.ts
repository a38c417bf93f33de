/**
 * `deploy --metrics 127.0.0.1:0` on a real fleet (Docker, the nginx container
 * of the fixture, its access log) under load: /metrics scraped all through
 * the rollout, and the live page loaded in a real headless browser (Debian's
 * chromium, driven by playwright-core) while the rollout runs. The page's
 * screenshot is kept at test-artifacts/live-page.png.
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { chromium } from 'playwright-core';
import { LABELS } from '../../src/ports.js';
import { guard, moreRequests, root, startCliUntil, startLoad, useFleets, waitFor } from './fixture.js';

const fleet = useFleets();
const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOT = join(root, 'test-artifacts', 'live-page.png');

interface Sample {
  /** revision → instances of it, any phase */
  revisions: Map<string, number>;
  reloads: number;
  text: string;
}

function parseSample(text: string): Sample {
  const revisions = new Map<string, number>();
  let reloads = 0;
  for (const m of text.matchAll(/^fleetroll_instances\{[^}]*revision="([^"]+)"[^}]*\} (\d+)$/gm))
    revisions.set(m[1]!, (revisions.get(m[1]!) ?? 0) + Number(m[2]));
  for (const m of text.matchAll(/^fleetroll_nginx_reloads_total\{[^}]*\} (\d+)$/gm)) reloads += Number(m[1]);
  return { revisions, reloads, text };
}

const seriesValue = (text: string, re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);

describe('deploy --metrics: a real rollout seen through /metrics and the live page', () => {
  it(
    'both revisions and growing reloads while it runs; outcome success after; the page shows instances, revisions and the load balancer',
    { timeout: guard(240_000) },
    async (t) => {
      const f = await fleet('metrics');
      const old = await f.at100(3);
      const oldNames = (await f.instances()).map((i) => i.name);
      const load = startLoad(f.url, { getPerSecond: 20, postConcurrency: 1 });
      await moreRequests(load, 10, 'requests before the rollout');

      // minReadySeconds keeps each new instance a while beside the old ones: time to scrape and to load the page.
      const file = f.fleetFile({ image: 'fleetroll-example:1.1.0', replicas: 3, maxSurge: 1, maxUnavailable: 0, minReadySeconds: 3 });
      const cli = await startCliUntil(['deploy', '-f', file, '--metrics', '127.0.0.1:0', '--metrics-linger', '60s'], /^metrics: http:\/\/127\.0\.0\.1:\d+\/$/m);
      const url = /^metrics: (http:\/\/127\.0\.0\.1:\d+\/)$/m.exec(cli.stdout())?.[1] ?? '';
      const exited = cli.exited;
      let done = false;
      void exited.then(() => (done = true));

      // Scrape until the server goes away (the CLI ends once a scrape has read the outcome).
      const samples: Sample[] = [];
      const scraping = (async () => {
        while (!done) {
          const text = await fetch(`${url}metrics`).then(
            (r) => r.text(),
            () => undefined,
          );
          if (text !== undefined) samples.push(parseSample(text));
          await new Promise((r) => setTimeout(r, 150));
        }
      })();

      // The browser, while the rollout runs: wait for what only the event stream can bring (a new revision's instance).
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
      let shown: { hosts: string; balancers: string; rollout: string; updates: number };
      try {
        const page = await browser.newPage({ viewport: { width: 1280, height: 760 } });
        await page.goto(url);
        // Strings, evaluated in the page (this file is compiled without the DOM's types).
        await page.waitForFunction(
          `(() => {
          const chips = [...document.querySelectorAll('#hosts .rev')].map((e) => e.textContent || '');
          return chips.some((c) => c.startsWith('1.0.0')) && chips.some((c) => c.startsWith('1.1.0')) && Number(document.body.dataset.updates) >= 2;
        })()`,
          undefined,
          { timeout: guard(60_000), polling: 100 },
        );
        // A moment more, so the versions strip has the new version's answers too.
        await page
          .waitForFunction(`(document.querySelector('#versions')?.textContent || '').includes('1.1.0')`, undefined, { timeout: guard(10_000), polling: 200 })
          .catch(() => {});
        shown = {
          hosts: (await page.locator('#hosts').textContent()) ?? '',
          balancers: (await page.locator('#balancers').textContent()) ?? '',
          rollout: (await page.locator('#rollout').textContent()) ?? '',
          updates: Number(await page.locator('body').getAttribute('data-updates')),
        };
        mkdirSync(join(root, 'test-artifacts'), { recursive: true });
        await page.screenshot({ path: SCREENSHOT, fullPage: true });
        t.diagnostic(`live page screenshot: ${SCREENSHOT}`);
        console.log(`live page screenshot: ${SCREENSHOT}`);
      } finally {
        await browser.close();
      }

      const end = await exited;
      await scraping;
      await moreRequests(load, 5, 'requests after the rollout');
      await load.stop();
      assert.equal(end.code, 0, end.stdout + end.stderr);
      assert.doesNotMatch(end.stderr, /leak check/, 'the server closed with the command');
      const newRev = (await f.instances())[0]?.labels[LABELS.revision] ?? '';
      const newNames = (await f.instances()).map((i) => i.name);
      t.diagnostic(`${samples.length} scrapes; page updated ${shown.updates} times`);

      // During: both revisions at once, and the reload counter growing.
      const mixed = samples.find((s) => (s.revisions.get(old) ?? 0) > 0 && (s.revisions.get(newRev) ?? 0) > 0);
      assert.ok(
        mixed,
        `a scrape showed instances of ${old} and ${newRev} at once; revisions seen: ${samples.map((s) => JSON.stringify([...s.revisions])).join(' ')}`,
      );
      assert.ok(samples.length > 3);
      assert.ok(samples[samples.length - 1]!.reloads > samples[0]!.reloads, `reloads grew: ${samples.map((s) => s.reloads).join(',')}`);

      // After: the last scrape (the one the linger waited for) has the outcome and the traffic.
      const last = samples[samples.length - 1]!.text;
      assert.match(last, /^fleetroll_rollouts_total\{service="[^"]+",strategy="RollingUpdate",outcome="success"\} 1$/m, last);
      assert.match(last, /^fleetroll_rollout_duration_seconds_count\{service="[^"]+",outcome="success"\} 1$/m);
      assert.equal(seriesValue(last, /^fleetroll_instances\{[^}]*revision="[^"]+",phase="available"\} (\d+)$/m), 3, last);
      assert.ok(
        seriesValue(last, new RegExp(`^fleetroll_requests_total\\{service="[^"]+",revision="${newRev}"\\} (\\d+)$`, 'm')) > 0,
        'the access log attributed requests to the new revision',
      );
      assert.ok(seriesValue(last, /^fleetroll_last_deploy_requests\{service="[^"]+"\} (\d+)$/m) > 0, 'the deploy health numbers');
      assert.match(last, /^fleetroll_heals_total\{service="[^"]+",reason="exited"\} 0$/m);

      // The page: the host's instances (old and new names), both revisions, the load balancer's servers.
      assert.match(shown.hosts, /host local/);
      assert.ok(
        oldNames.some((n) => shown.hosts.includes(n)),
        `an old instance is shown: ${shown.hosts}`,
      );
      assert.ok(
        newNames.some((n) => shown.hosts.includes(n)),
        `a new instance is shown: ${shown.hosts}`,
      );
      assert.match(shown.balancers, new RegExp(`nginx ${f.names.nginx} on local`));
      assert.ok(
        [...oldNames, ...newNames].some((n) => shown.balancers.includes(n)),
        `the load balancer's servers are shown: ${shown.balancers}`,
      );
      assert.match(shown.rollout, /RollingUpdate/);
      await waitFor(
        'nothing left listening',
        async () =>
          await fetch(`${url}metrics`).then(
            () => false,
            () => true,
          ),
        5000,
      );
    },
  );
});
