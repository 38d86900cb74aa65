// Builds an in-process AtlantisServer on a loopback port with a fresh data dir, through the
// same flag parsing the CLI uses.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseFlags } from '../../src/config/flags.js';
import { nullLogger, type Logger } from '../../src/log.js';
import { buildServerConfig, SERVER_FLAGS } from '../../src/server/config.js';
import { loadStoreParts } from '../../src/server/locks/open-store.js';
import { ServerMetrics } from '../../src/server/metrics.js';
import { type AtlantisServerOptions, AtlantisServer } from '../../src/server/server.js';
import { workflowPlugin } from '../../src/server/workflow/index.js';
import { TERRAFORM } from './terraform.js';
import { sleep } from '../../src/async.js';

export interface TestServer {
  server: AtlantisServer;
  url: string;
  dataDir: string;
}

export async function startTestServer(
  extraArgs: string[] = [],
  opts: Partial<AtlantisServerOptions> & {
    logger?: Logger;
    /** With the workflow plugin, on the store the flags choose, as the CLI has it. */
    workflow?: boolean;
  } = {},
): Promise<TestServer> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ato-server-'));
  const argv = [
    '--port',
    '0',
    '--bind-address',
    '127.0.0.1',
    '--data-dir',
    dataDir,
    '--repo-allowlist',
    'github.com/acme/*',
    '--gh-user',
    'atlantis-bot',
    '--gh-token',
    'test-token',
    '--insecure-no-webhook-secret',
    '--tf-binary',
    TERRAFORM,
    ...extraArgs,
  ];
  const config = buildServerConfig(parseFlags(argv, SERVER_FLAGS, {}).values);
  const { workflow, ...serverOpts } = opts;
  const plugins = [...(serverOpts.plugins ?? [])];
  if (workflow) {
    const parts = await loadStoreParts(config);
    plugins.push((s) => workflowPlugin(s, parts));
  }
  const server = new AtlantisServer({
    config,
    logger: opts.logger ?? nullLogger(),
    metrics: new ServerMetrics({ defaults: false }),
    ...serverOpts,
    plugins,
  });
  const url = await server.start();
  return { server, url, dataDir };
}

export async function getJson<T>(url: string): Promise<{ status: number; body: T }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
  return { status: res.status, body: (await res.json()) as T };
}

/** Polls `cond` every 50 ms until it is true; fails after `timeoutMs`. */
export async function waitFor(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await cond()) return;
    await sleep(50);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}
