// Which terraform a project runs (Atlantis v0.47's rules: server/core/terraform/tfclient and
// project_command_context_builder.go), and the pieces of a download that need no network:
// release file names, SHA256SUMS, zip extraction (archives made by the real `zip`), and
// finding a version on PATH or in the data dir's bin/, or Atlantis's error without downloads.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { nullLogger } from '../src/log.js';
import { loadRepoConfig } from '../src/server/workflow/repo-config/atlantis-yaml.js';
import { ProcessHost } from '../src/server/terraform/process-host.js';
import { TerraformBinaries, extractFile, findOnPath } from '../src/server/terraform/tf-install.js';
import { readRequiredVersions } from '../src/server/terraform/tf-module.js';
import {
  type VersionChoice,
  type VersionChoiceInput,
  checksumFor,
  chooseTfVersion,
  exactRequiredVersion,
  normaliseTfVersion,
  releaseFiles,
  requiredVersionsIn,
  versionFromJson,
} from '../src/server/terraform/tf-versions.js';
import { TERRAFORM } from './support/terraform.js';

const tmp = mkdtempSync(path.join(tmpdir(), 'tf-versions-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

describe('terraform version decisions (pure)', () => {
  it('normalises versions as Atlantis prints them, and refuses anything that could leave a file name', () => {
    const rows: Array<[string, string | null]> = [
      ['1.9.0', '1.9.0'],
      ['v1.9.0', '1.9.0'],
      ['1.9', '1.9.0'],
      ['1', '1.0.0'],
      [' 0.12.31 ', '0.12.31'],
      ['1.10.0-beta1', '1.10.0-beta1'],
      ['1.6.0-rc.1', '1.6.0-rc.1'],
      ['01.02.03', '1.2.3'],
      ['1.9.0/../../etc', null],
      ['../1.9.0', null],
      ['1.9.0 && rm -rf /', null],
      ['latest', null],
      ['', null],
      ['>= 1.4', null],
      ['1.2.3.4', null],
    ];
    for (const [raw, want] of rows) assert.equal(normaliseTfVersion(raw), want, raw);
  });

  it('names release files in HashiCorp layout', () => {
    assert.deepEqual(releaseFiles('https://releases.hashicorp.com/', '1.9.0', 'linux', 'x64'), {
      zipName: 'terraform_1.9.0_linux_amd64.zip',
      zipUrl: 'https://releases.hashicorp.com/terraform/1.9.0/terraform_1.9.0_linux_amd64.zip',
      sumsUrl: 'https://releases.hashicorp.com/terraform/1.9.0/terraform_1.9.0_SHA256SUMS',
    });
    assert.equal(releaseFiles('http://m', '1.0.0', 'darwin', 'arm64').zipName, 'terraform_1.0.0_darwin_arm64.zip');
  });

  it('reads a SHA256SUMS file', () => {
    const a = 'a'.repeat(64);
    const b = 'B'.repeat(64);
    const sums = `${a}  terraform_1.9.0_darwin_amd64.zip\n${b}  terraform_1.9.0_linux_amd64.zip\n`;
    assert.equal(checksumFor(sums, 'terraform_1.9.0_linux_amd64.zip'), 'b'.repeat(64));
    assert.equal(checksumFor(sums, 'terraform_1.9.0_linux_arm64.zip'), undefined);
    assert.equal(checksumFor(`${a} *terraform_x.zip`, 'terraform_x.zip'), a, 'binary-mode marker');
    assert.equal(checksumFor('abc  terraform_x.zip', 'terraform_x.zip'), undefined, 'not a sha256');
  });

  it('takes an exact required_version only (Atlantis without listing releases)', () => {
    const rows: Array<[string, string | undefined]> = [
      ['1.9.0', '1.9.0'],
      ['=1.9.0', '1.9.0'],
      ['= 1.9.0', '1.9.0'],
      ['>= 1.4', undefined],
      ['~> 1.9.0', undefined],
      ['1.9.0, < 2', undefined],
    ];
    for (const [c, want] of rows) assert.equal(exactRequiredVersion(c), want, c);
  });

  it('finds required_version settings, not commented ones', () => {
    const src = `terraform {\n  required_version = "= 1.5.7"\n}\n# required_version = "1.0.0"\n// required_version = "1.0.1"\n`;
    assert.deepEqual(requiredVersionsIn([src]), ['= 1.5.7']);
    assert.deepEqual(requiredVersionsIn([src, 'terraform {\n\trequired_version=">= 1.4"\n}\n']), ['= 1.5.7', '>= 1.4']);
  });

  it('chooses the version as Atlantis: terraform_version, one exact required_version, --default-tf-version, the binary', () => {
    const rows: Array<[VersionChoiceInput, VersionChoice]> = [
      [
        { projectVersion: 'v1.5.7', requiredVersions: ['1.6.0'], defaultVersion: '1.7.0' },
        { kind: 'version', version: '1.5.7', from: 'project' },
      ],
      [
        { requiredVersions: ['1.6.0'], defaultVersion: '1.7.0' },
        { kind: 'version', version: '1.6.0', from: 'required_version' },
      ],
      [
        { requiredVersions: ['>= 1.4'], defaultVersion: '1.7.0' },
        { kind: 'version', version: '1.7.0', from: 'default' },
      ],
      [
        { requiredVersions: ['1.6.0', '1.6.0'], defaultVersion: '1.7.0' },
        { kind: 'version', version: '1.7.0', from: 'default' },
      ],
      [{ requiredVersions: [] }, { kind: 'binary' }],
      [{ requiredVersions: ['>= 1.4'] }, { kind: 'binary' }],
      [
        { projectVersion: '../x', requiredVersions: [] },
        { kind: 'invalid', message: 'version "../x" could not be parsed: Malformed version: ../x' },
      ],
    ];
    for (const [input, want] of rows) assert.deepEqual(chooseTfVersion(input), want, JSON.stringify(input));
  });

  it('reads the version terraform reports', () => {
    assert.equal(versionFromJson('{"terraform_version":"1.11.4","platform":"linux_amd64"}'), '1.11.4');
    assert.equal(versionFromJson('Terraform v1.11.4'), undefined);
  });
});

describe('zip extraction (archives from the real zip)', () => {
  const content = Buffer.from(`#!/bin/sh\necho ${'payload '.repeat(2000)}\n`);
  const src = path.join(tmp, 'zsrc');
  mkdirSync(src);
  writeFileSync(path.join(src, 'terraform'), content);
  writeFileSync(path.join(src, 'LICENSE.txt'), 'license\n');
  const make = (name: string, flags: string[]): Buffer => {
    const out = path.join(tmp, name);
    execFileSync('zip', ['-q', ...flags, out, 'LICENSE.txt', 'terraform'], { cwd: src });
    return readFileSync(out);
  };
  it('extracts a deflated and a stored entry', () => {
    assert.deepEqual(extractFile(make('deflated.zip', ['-9']), 'terraform'), content);
    assert.deepEqual(extractFile(make('stored.zip', ['-0']), 'terraform'), content);
  });
  it('refuses a damaged archive, a missing entry, and a failed CRC', () => {
    const zip = make('again.zip', ['-9']);
    assert.throws(() => extractFile(zip, 'tofu'), /no tofu in the zip/);
    assert.throws(() => extractFile(Buffer.from('not a zip'), 'terraform'), /not a zip archive/);
    const stored = Buffer.from(make('again-stored.zip', ['-0']));
    const at = stored.indexOf(Buffer.from('payload'));
    stored[at] = 'P'.charCodeAt(0);
    assert.throws(() => extractFile(stored, 'terraform'), /fails its CRC check/);
  });
});

describe('finding a version without downloading', () => {
  it('looks on PATH for terraform<v>, then in the data dir, else says downloads are disabled', async () => {
    const onPath = path.join(tmp, 'path-bin');
    mkdirSync(onPath);
    const fake = path.join(onPath, 'terraform1.2.3');
    writeFileSync(fake, '#!/bin/sh\necho "Terraform v1.2.3"\n');
    chmodSync(fake, 0o755);
    assert.equal(findOnPath('terraform1.2.3', `/nonexistent:${onPath}`), fake);
    assert.equal(findOnPath('terraform9.9.9', onPath), undefined);

    const binDir = path.join(tmp, 'data', 'bin');
    mkdirSync(binDir, { recursive: true });
    const kept = path.join(binDir, 'terraform1.4.0');
    writeFileSync(kept, '#!/bin/sh\n');
    chmodSync(kept, 0o755);
    const host = new ProcessHost({ logger: nullLogger() });
    const b = new TerraformBinaries({
      tfBinary: TERRAFORM,
      download: false,
      downloadUrl: 'http://127.0.0.1:9/never',
      binDir,
      host,
      logger: nullLogger(),
      pathEnv: onPath,
    });
    const local = await b.localVersion();
    assert.match(local ?? '', /^\d+\.\d+\.\d+/);
    assert.equal(await b.binaryFor(local!), TERRAFORM, 'the --tf-binary when it is that version');
    assert.equal(await b.binaryFor('1.2.3'), fake);
    assert.equal(await b.binaryFor('1.4.0'), kept, 'kept from an earlier download');
    await assert.rejects(b.binaryFor('1.5.7'), {
      message: `could not find terraform version 1.5.7 in PATH or ${binDir}, and downloads are disabled`,
    });
    host.close();
  });

  it("reads required_version from the module's own .tf files only", async () => {
    const dir = path.join(tmp, 'module');
    mkdirSync(path.join(dir, 'sub'), { recursive: true });
    writeFileSync(path.join(dir, 'versions.tf'), 'terraform {\n  required_version = "1.5.7"\n}\n');
    writeFileSync(path.join(dir, 'sub', 'other.tf'), 'terraform {\n  required_version = "1.0.0"\n}\n');
    writeFileSync(path.join(dir, 'notes.txt'), 'required_version = "0.1.0"\n');
    assert.deepEqual(await readRequiredVersions(dir), ['1.5.7']);
    assert.deepEqual(await readRequiredVersions(path.join(tmp, 'nope')), []);
  });
});

describe('terraform_version in atlantis.yaml', () => {
  it('is read as written, a YAML number too (Atlantis reads the scalar as a string)', () => {
    const dir = path.join(tmp, 'yaml');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      path.join(dir, 'atlantis.yaml'),
      'version: 3\nprojects:\n- dir: a\n  terraform_version: v1.9.0\n- dir: b\n  terraform_version: 1.5\n- dir: c\n',
    );
    const cfg = loadRepoConfig(dir);
    assert.deepEqual(
      cfg?.projects.map((p) => p.terraformVersion),
      ['v1.9.0', '1.5', undefined],
    );
    assert.equal(normaliseTfVersion('1.5'), '1.5.0');
  });
});
