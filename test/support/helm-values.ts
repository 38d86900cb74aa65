// The values files `migrate helm-values` is tested on: the official chart's own (values.yaml,
// its CI values, test-values.yaml, the README's examples and every helm-unittest case's `set:`,
// test/fixtures/helm-chart/) and ours (test/fixtures/helm-values/).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import type { Obj } from '../../src/cli/helm-values/values.js';

export const CHART_DIR = fileURLToPath(new URL('../fixtures/helm-chart/', import.meta.url));
export const OURS_DIR = fileURLToPath(new URL('../fixtures/helm-values/', import.meta.url));

export interface ValuesCase {
  /** `tests/statefulset_test.yaml: <it>`, or a file's path under test/fixtures/. */
  id: string;
  release: string;
  values: Obj;
}

/** helm-unittest's `set:`: keys are dotted paths into the values. */
export function expandSet(set: Record<string, unknown>): Obj {
  const out: Obj = {};
  for (const [dotted, value] of Object.entries(set)) {
    const keys = dotted.split('.');
    let cur = out;
    for (const k of keys.slice(0, -1)) {
      if (typeof cur[k] !== 'object' || cur[k] === null || Array.isArray(cur[k])) cur[k] = {};
      cur = cur[k] as Obj;
    }
    cur[keys.at(-1) as string] = value as Obj[string];
  }
  return out;
}

/** Every test of the chart's helm-unittest suites that sets values, with the suite's release name. */
export function unittestCases(): ValuesCase[] {
  const dir = path.join(CHART_DIR, 'tests');
  const cases: ValuesCase[] = [];
  for (const file of fs.readdirSync(dir).sort()) {
    const suite = parse(fs.readFileSync(path.join(dir, file), 'utf8')) as {
      release?: { name?: string };
      tests: Array<{ it: string; set?: Record<string, unknown> }>;
    };
    for (const t of suite.tests) {
      if (!t.set) continue;
      cases.push({ id: `tests/${file}: ${t.it}`, release: suite.release?.name ?? 'atlantis', values: expandSet(t.set) });
    }
  }
  return cases;
}

/** Values files on disk, by their path under test/fixtures/. */
export const CHART_FILES = [
  'helm-chart/values.yaml',
  'helm-chart/test-values.yaml',
  'helm-chart/ci/ci-values.yaml',
  'helm-chart/ci/ci-init-config-values.yaml',
  ...fs
    .readdirSync(path.join(CHART_DIR, 'readme-examples'))
    .sort()
    .map((f) => `helm-chart/readme-examples/${f}`),
];

export const OUR_FILES = fs
  .readdirSync(OURS_DIR)
  .filter((f) => f.endsWith('.yaml'))
  .sort()
  .map((f) => `helm-values/${f}`);

export const fixturePath = (rel: string): string => fileURLToPath(new URL(`../fixtures/${rel}`, import.meta.url));
