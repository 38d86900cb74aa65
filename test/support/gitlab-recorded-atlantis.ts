// A stand-in for Atlantis itself, for testing the GitLab differential's comparing half before
// the server speaks GitLab: an HTTP server that answers each webhook as Atlantis answered it
// in the fixture and then makes, against the stand-in, the requests Atlantis made in that
// step. Run through compareGitlabWithAtlantis it must match the fixture step for step; what
// that proves is the harness (steps, waits, capture, normalisation, comparison), not a
// GitLab implementation.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { GlFixture, StartServer } from './atlantis-gitlab-differential.js';
import type { RequestRecord } from './atlantis-gitlab-session.js';
import { type Placeholders, fillPlaceholders, sendRecorded } from './gitlab-standin-replay.js';

interface Delivery {
  status: number;
  body: string;
  /** The step's requests, made after the step's last webhook is answered. */
  requests: RequestRecord[] | undefined;
}

/** Starts a server that repeats what Atlantis did in `fixture` (its host: `host`, its port: the `--port` flag). */
export function recordedAtlantis(fixtureOf: (session: string) => GlFixture, host: string): StartServer {
  return async (flags, env, gl, session) => {
    const flag = (name: string): string => {
      const i = flags.indexOf(name);
      if (i < 0) throw new Error(`no ${name} among the flags`);
      return flags[i + 1]!;
    };
    const fixture = fixtureOf(session.name);
    const places: Placeholders = {
      gitlabUrl: gl.url,
      gitlabHostPort: gl.hostPort,
      serverUrl: flag('--atlantis-url'),
      dataDir: flag('--data-dir'),
    };
    const token = flag('--gitlab-token');
    const ca = env.SSL_CERT_FILE ? readFileSync(env.SSL_CERT_FILE) : undefined;
    for (const r of fixture.startup) await sendRecorded(r, places, token, ca);
    const queue: Delivery[] = fixture.steps.flatMap((s) =>
      s.webhooks.map((w, i) => ({ status: w.status, body: w.body, requests: i === s.webhooks.length - 1 ? s.requests : undefined })),
    );
    let done = 0;
    let work = Promise.resolve();
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const d = queue.shift();
        if (!d) {
          res.writeHead(500).end('no webhook was recorded here\n');
          return;
        }
        res.writeHead(d.status, { 'content-type': 'text/plain; charset=utf-8' }).end(fillPlaceholders(d.body, places) as string);
        const requests = d.requests;
        if (requests === undefined) return;
        work = work.then(async () => {
          for (const r of requests) await sendRecorded(r, places, token, ca);
          done++;
        });
      });
    });
    const port = Number(flag('--port'));
    await new Promise<void>((resolve) => server.listen(port, host, resolve));
    return {
      url: `http://${host}:${port}`,
      stop: async () => {
        await work;
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      },
      finishedSince: () => {
        const at = done;
        return () => done > at;
      },
    };
  };
}
