// Which API server answers to a pod create mean "this revision's pods are refused"
// (reconcile/replacement-check.ts), and how long such an answer is planned with.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { REJECTED_RECHECK_MS, rejectionOf, usableVerdict, type ReplacementVerdict } from '../src/controller/reconcile/replacement-check.js';

test('rejectionOf: invalid, malformed and admission refusals are rejections; quota, conflicts and server errors are not', () => {
  const status = (message: string) => ({ kind: 'Status', status: 'Failure', message });
  const rows: Array<[string, number, unknown, string | null]> = [
    [
      '422 Invalid (2GB)',
      422,
      status('Pod "x-1" is invalid: spec.containers[0].resources.limits[memory]: Invalid value: "2GB"'),
      'Pod "x-1" is invalid: spec.containers[0].resources.limits[memory]: Invalid value: "2GB"',
    ],
    ['400 BadRequest', 400, status('quantities must match the regular expression'), 'quantities must match the regular expression'],
    [
      '403 PodSecurity',
      403,
      status('pods "x-1" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false'),
      'pods "x-1" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false',
    ],
    [
      '403 quota: the dry-run pod is one too many, a replacement is not',
      403,
      status('pods "x-1" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2'),
      null,
    ],
    ['409 AlreadyExists', 409, status('pods "x-1" already exists'), null],
    ['500', 500, status('etcdserver: request timed out'), null],
    ['422 without a Status body', 422, undefined, 'HTTP 422'],
    ['422 with a text body', 422, 'bad pod', 'bad pod'],
  ];
  for (const [what, code, body, want] of rows) assert.equal(rejectionOf(code, body), want, what);
});

test('usableVerdict: an acceptance holds for its revision; a refusal is asked again after 30 s', () => {
  const accepted: ReplacementVerdict = { uid: 'u', revision: 'r1', rejected: null, at: 1000 };
  const refused: ReplacementVerdict = { ...accepted, rejected: 'invalid' };
  assert.equal(usableVerdict(undefined, 'u', 'r1', 1000), undefined);
  assert.equal(usableVerdict(accepted, 'u', 'r1', 1000 + 10 * REJECTED_RECHECK_MS), accepted);
  assert.equal(usableVerdict(accepted, 'u', 'r2', 1000), undefined, 'another revision');
  assert.equal(usableVerdict(accepted, 'other-uid', 'r1', 1000), undefined, 'a new object of the same name');
  assert.equal(usableVerdict(refused, 'u', 'r1', 1000 + REJECTED_RECHECK_MS - 1), refused);
  assert.equal(usableVerdict(refused, 'u', 'r1', 1000 + REJECTED_RECHECK_MS), undefined);
});
