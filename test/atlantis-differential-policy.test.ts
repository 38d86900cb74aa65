// The policy-check and OpenTofu differential: our server, run through the scenario of
// test/support/atlantis-policy-scenario.ts (a failing policy set, approve_policies refused to a
// non-owner and accepted from owners, the apply held until policies pass, a cleared approval,
// and an OpenTofu project), must post the same comments and set the same commit statuses, in
// the same order, as Atlantis v0.47 did. conftest and tofu are the real ones in both runs
// (built from their Go modules, docs/test-tools.md). What Atlantis did is in
// test/fixtures/atlantis-v0.47/policy-scenario.json, normalised as the GitHub differential's
// (test/atlantis-differential.test.ts tells how the fixtures are recorded, and where Atlantis's
// binary comes from); deliberate differences in policy-deliberate-differences.json.
//
//   ATLANTIS_REFERENCE_BIN=/tmp/atlantis-ref/atlantis node --import tsx test/atlantis-differential-policy.test.ts --record
import { compareWithAtlantis, recordAtlantis } from './support/atlantis-differential.js';
import { POLICY_SCENARIO } from './support/atlantis-policy-scenario.js';

if (process.argv.includes('--record')) await recordAtlantis(POLICY_SCENARIO);
else
  compareWithAtlantis({
    title: 'policy checks and OpenTofu: our server posts what Atlantis v0.47 posts',
    replicas: 1,
    net: '127.0.35',
    spec: POLICY_SCENARIO,
  });
