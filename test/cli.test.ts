// The CLI as a real process: startup errors, SIGTERM when idle, and the drain command.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { minimalServerArgs, runCli, startCli, waitForHttp } from './support/cli.js';
import { childList } from './support/children.js';

const children = childList();
after(() => {
  children.killAll();
});

let nextHost = 10;
function serverArgs(dataDir: string): { args: string[]; url: string } {
  const host = `127.0.33.${nextHost++}`;
  return {
    url: `http://${host}:4141`,
    args: minimalServerArgs(dataDir, host),
  };
}

describe('atlantis-operator CLI', () => {
  it('prints its version and help', () => {
    const v = runCli(['version']);
    assert.equal(v.code, 0);
    assert.match(v.stdout, /^atlantis-operator \d+\.\d+\.\d+/);
    for (const cmd of ['server', 'drain', 'controller']) {
      const h = runCli([cmd, '--help']);
      assert.equal(h.code, 0, h.stderr);
      assert.match(h.stdout, /Usage:/);
    }
    assert.match(runCli(['server', '--help']).stdout, /--drain-timeout duration[\s\S]*\[\$ATLANTIS_DRAIN_TIMEOUT\]/);
  });

  const dataDir = mkdtempSync(path.join(tmpdir(), 'ato-cli-'));
  const base = ['--repo-allowlist', 'github.com/acme/*', '--gh-user', 'bot', '--gh-token', 'tok', '--data-dir', dataDir];
  const file = path.join(dataDir, 'a-file');
  writeFileSync(file, '');
  const badCases: Array<[string, string[], RegExp]> = [
    ['an unknown command', ['deploy'], /unknown command "deploy"/],
    ['an unknown flag', ['server', ...base, '--insecure-no-webhook-secret', '--no-such-flag'], /unknown flag: --no-such-flag/],
    ['a missing webhook secret', ['server', ...base], /--gh-webhook-secret is required/],
    [
      'an unwritable data dir',
      ['server', ...base, '--insecure-no-webhook-secret', '--data-dir', path.join(file, 'sub')],
      /--data-dir .* is not a writable directory/,
    ],
    ['a bad drain timeout', ['drain', '--timeout', 'later'], /--timeout/],
  ];
  for (const [name, args, re] of badCases) {
    it(`exits 2 with one clear line for ${name}`, () => {
      const r = runCli(args);
      assert.equal(r.code, 2);
      assert.match(r.stderr, re);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    });
  }

  it('the server exits 0 on SIGTERM when idle', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ato-cli-'));
    const { args, url } = serverArgs(dir);
    const p = startCli(args);
    children.push(p);
    await waitForHttp(`${url}/healthz`);
    assert.ok(existsSync(path.join(dir, 'atlantis-operator.pid')));
    p.child.kill('SIGTERM');
    const { code } = await p.exited;
    assert.equal(code, 0, p.output());
    assert.equal(existsSync(path.join(dir, 'atlantis-operator.pid')), false, 'pid file removed');
    const logs = p
      .output()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.ok(logs.some((l) => l.msg === 'Drain finished' && l.exitCode === 0));
    for (const l of logs) {
      assert.deepEqual(Object.keys(l).slice(0, 3), ['level', 'time', 'msg']);
      assert.match(String(l.msg), /^[A-Z][^.]*[^.]$/);
    }
    assert.ok(!p.output().includes('tok"'), 'the token never appears in logs');
  });

  it('`drain` against an idle server exits 0 and the server exits 0', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ato-cli-'));
    const { args, url } = serverArgs(dir);
    const p = startCli(args);
    children.push(p);
    await waitForHttp(`${url}/healthz`);
    const d = runCli(['drain', '--data-dir', dir, '--timeout', '20s']);
    assert.equal(d.code, 0, d.stdout + d.stderr);
    assert.match(d.stdout, /drain started/);
    assert.match(d.stdout, /drained/);
    assert.equal((await p.exited).code, 0);
  });

  it('`drain` with no server on the data dir exits 1', () => {
    const r = runCli(['drain', '--data-dir', mkdtempSync(path.join(tmpdir(), 'ato-cli-'))]);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /no running server found/);
  });
});
