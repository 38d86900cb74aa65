// The comparing half of the Gitea differential (test/atlantis-gitea-differential.test.ts has
// the recorder and the fixture's story): our server, one process or several replicas on one
// Redis behind a round-robin forwarder (a Service), runs the scenario against a real Gitea and
// each step's comments and statuses must be what Atlantis v0.47 wrote to the same Gitea, or
// a documented deliberate difference (deliberate-differences.json beside the fixture).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type DeliberateDifference, commandEnds, lines, rewriteLines } from './atlantis-differential.js';
import { STEPS, type StepRecord, lineDiff, terraformOnPath } from './atlantis-scenario.js';
import {
  GITEA_FIXTURE_DIR,
  type GiteaWorld,
  giteaFlags,
  giteaServerEnv,
  hookServer,
  readGiteaFixture,
  runGiteaScenario,
  startGiteaWorld,
} from './atlantis-gitea-scenario.js';
import { type CliProcess, startCli, waitForHttp } from './cli.js';
import { type Forwarder, startRoundRobin } from './gitea-proxy.js';
import { type RedisServer, replicaArgs, startRedisServer } from './redis-server.js';

export interface GiteaCompareOptions {
  title: string;
  replicas: number;
  /** Loopback prefix `a.b.c`: .1 Gitea, .2 the API recorder, .3 onwards the servers, .9 the forwarder. */
  net: string;
}

export function compareGiteaWithAtlantis(o: GiteaCompareOptions): void {
  const fixture = readGiteaFixture();
  const deliberate = JSON.parse(readFileSync(path.join(GITEA_FIXTURE_DIR, 'deliberate-differences.json'), 'utf8')) as Record<
    string,
    DeliberateDifference
  >;
  const expected = new Map(fixture.steps.map((s) => [s.name, s]));
  let w: GiteaWorld | undefined;
  let redis: RedisServer | undefined;
  let service: Forwarder & { sent: number[] };
  const servers: CliProcess[] = [];
  const tempDirs: string[] = [];
  let ours: StepRecord[] = [];

  describe(o.title, () => {
    before(async () => {
      terraformOnPath();
      w = await startGiteaWorld(`${o.net}.1`, `${o.net}.2`);
      if (o.replicas > 1) redis = await startRedisServer();
      const serverUrl = `http://${o.net}.3:4141`;
      const urls: string[] = [];
      const dataDirs: string[] = [];
      for (let i = 0; i < o.replicas; i++) {
        const host = `${o.net}.${i + 3}`;
        const dataDir = mkdtempSync(path.join(tmpdir(), 'ato-gitea-diff-data-'));
        const home = mkdtempSync(path.join(tmpdir(), 'ato-gitea-diff-home-'));
        tempDirs.push(dataDir, home);
        dataDirs.push(dataDir);
        const flags = [...giteaFlags(w, dataDir, serverUrl, 4141), '--bind-address', host];
        if (redis) flags.push(...replicaArgs(redis, `r${i + 1}`));
        const server = startCli(flags, giteaServerEnv(home));
        servers.push(server);
        urls.push(`http://${host}:4141/events`);
        await waitForHttp(`http://${host}:4141/healthz`).catch((e: Error) => {
          throw new Error(`${e.message}\n${server.output()}`);
        });
      }
      service = await startRoundRobin(urls, `${o.net}.9`);
      await hookServer(w, `${service.url}/events`);
      const world = w;
      ours = await runGiteaScenario({
        w: world,
        ctx: { serverUrl, dataDirs, w: world },
        // What ours must post: Atlantis's lines, rewritten where a deliberate difference says
        // (a close that comments here and not in Atlantis is over once that comment came).
        expect: (step) => {
          const d = deliberate[step.name];
          const want = d ? rewriteLines(lines(expected.get(step.name)), d) : lines(expected.get(step.name));
          return {
            comments: want.filter((l) => l.startsWith('comment on #')).length,
            statuses: want.filter((l) => l.startsWith('status ')).length,
          };
        },
        waitMs: 60_000,
        quietMs: 1500,
        finishedSince: () => {
          const before = commandEnds(servers);
          return () => commandEnds(servers) > before;
        },
        onStep: (r) => console.log(`# ${r.name}: ${r.events.length} events`),
      });
    });
    after(async () => {
      for (const s of servers) s.child.kill('SIGTERM');
      await Promise.all(servers.map((s) => s.exited));
      await service?.close();
      await w?.close();
      await redis?.cleanup();
      for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
    });
    it('the fixture covers every step of the scenario, in order; deliberate differences name steps', () => {
      assert.deepEqual(
        fixture.steps.map((s) => s.name),
        STEPS.map((s) => s.name),
      );
      for (const name of Object.keys(deliberate)) assert.ok(expected.has(name), `deliberate-differences.json names no step "${name}"`);
    });
    if (o.replicas > 1)
      it("Gitea's webhooks were spread: several replicas ran commands, and webhooks reached PR owners through others", () => {
        assert.ok(
          service.sent.every((n) => n > 0),
          `deliveries per replica: ${service.sent.join(', ')}`,
        );
        const ran = servers.filter((s) => /"msg":"Command (finished|failed)"/.test(s.output())).length;
        const handed = servers.reduce(
          (n, s) => n + (s.output().match(/"msg":"Webhook handed to the replica that owns the pull request"/g)?.length ?? 0),
          0,
        );
        assert.ok(ran >= 2, `commands ran on ${ran} replica(s)`);
        assert.ok(handed > 0, 'no webhook was handed to its owner');
      });
    for (const step of STEPS) {
      it(`step "${step.name}"`, () => {
        const got = ours.find((r) => r.name === step.name);
        const atlantis = lines(expected.get(step.name));
        const d = deliberate[step.name];
        if (d !== undefined) {
          const plain = lineDiff(atlantis, lines(got)).some((l) => !l.startsWith('  '));
          assert.ok(plain, `step "${step.name}" now matches Atlantis v0.47 as it is: remove it from deliberate-differences.json`);
        }
        const diff = lineDiff(d ? rewriteLines(atlantis, d) : atlantis, lines(got));
        assert.ok(
          !diff.some((l) => !l.startsWith('  ')),
          `step "${step.name}" (${got?.did ?? ''}) differs from Atlantis v0.47 on Gitea (- Atlantis, + ours):\n${diff.join('\n')}`,
        );
      });
    }
  });
}
