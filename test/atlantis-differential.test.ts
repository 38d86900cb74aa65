// The differential test: our server, run through the scenario of test/support/atlantis-scenario.ts
// (PR events and comments on two repos), must post the same comments and set the same commit
// statuses, in the same order, as Atlantis v0.47 did, step by step. What Atlantis did is in
// test/fixtures/atlantis-v0.47/scenario.json: facts recorded from the real Atlantis, normalised
// (URLs, data dir, SHAs, ids, times) by the same code that normalises our server's run.
// Where we differ on purpose (documented in docs/server.md), deliberate-differences.json next to
// it says why and rewrites Atlantis's lines of that step into ours; the rest of the step must
// still match exactly, and the rewrite must still be needed. ATLANTIS_DIFF_REPORT=<file> writes
// every step's line diff as markdown. The comparing half is in test/support/atlantis-differential.ts;
// test/atlantis-differential-replicas.test.ts runs it against three replicas sharing one Redis.
//
// Recording the fixtures (never part of `make test`; needs an Atlantis binary built beforehand):
//
//   Build Atlantis v0.47 outside this repo from its source (here the bare mirror of
//   runatlantis/atlantis, commit 078d0a8 = v0.47.0 + 7 commits, incl. the v0.47.1 fix):
//     mkdir -p /tmp/atlantis-ref/src && cd /tmp/atlantis-ref/src
//     git -C <mirror> archive HEAD $(git -C <mirror> ls-tree --name-only HEAD | grep -v '^runatlantis.io$') | tar -x
//       (the snapshot lacks one image under runatlantis.io/, so that tree is left out)
//     nice -n 19 go build -ldflags "-X main.version=0.47.0 -X main.commit=078d0a82081e8a2b1645268c5f5bfec578246fa9 \
//       -X main.date=2026-08-22T00:51:47Z" -o /tmp/atlantis-ref/atlantis .
//   Then, from this repo:
//     ATLANTIS_REFERENCE_BIN=/tmp/atlantis-ref/atlantis node --import tsx test/atlantis-differential.test.ts --record
//
// Atlantis listens on every interface (it has no bind address), so the recorder runs itself in
// a network namespace of its own with only loopback (`unshare -rn`). Both servers get the same
// flags (ours also --bind-address, which Atlantis lacks): the stand-in as a GitHub Enterprise
// host over HTTPS with a self-signed certificate, TF_CLI_CONFIG_FILE unset,
// CHECKPOINT_DISABLE=1, --tf-download=false, terraform from PATH.
import { GITHUB_SCENARIO, compareWithAtlantis, recordAtlantis } from './support/atlantis-differential.js';

// ---- test ---------------------------------------------------------------------------

if (process.argv.includes('--record')) await recordAtlantis(GITHUB_SCENARIO);
else compareWithAtlantis({ title: 'our server posts what Atlantis v0.47 posts', replicas: 1, net: '127.0.18' });
