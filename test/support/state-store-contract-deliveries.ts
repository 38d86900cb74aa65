// The webhook deliveries every StateStore records (part of state-store-contract.ts): a
// delivery id accepted once, atomically with its command's journal entry; a replay writes
// nothing and says whether the first command started; a refused command's record goes with it.
import assert from 'node:assert/strict';
import type { StateStore } from '../../src/server/locks/state-store.js';

/** state-store-contract.ts's withStore, as far as these tests use it. */
type WithStore = (title: string, fn: (o: { store: StateStore }) => Promise<void>) => void;

const R = 'acme/infra';

export function deliveryContract(withStore: WithStore): void {
  withStore(
    'deliveries: a delivery id is journalled once; a replay writes nothing and says whether the first started',
    async ({ store: s }) => {
      const first = await s.acceptDelivery('d-1', { id: 'c1', repo: R, pull: 1, payload: { n: 1 } });
      assert.ok('accepted' in first);
      assert.equal(first.accepted.id, 'c1');
      // The same delivery again, whatever its command id: nothing journalled, the first not started yet.
      assert.deepEqual(await s.acceptDelivery('d-1', { id: 'c2', repo: R, pull: 1, payload: { n: 2 } }), { replay: 'pending' });
      await s.commandStarted('c1');
      assert.deepEqual(await s.acceptDelivery('d-1', { id: 'c3', repo: R, pull: 1, payload: { n: 3 } }), { replay: 'handled' });
      await s.commandFinished('c1');
      assert.deepEqual(await s.acceptDelivery('d-1', { id: 'c4', repo: R, pull: 1, payload: { n: 4 } }), { replay: 'handled' });
      assert.deepEqual(
        (await s.acceptedCommands()).map((c) => c.id),
        [],
        'no replay was journalled',
      );
      // Another delivery is another command.
      assert.ok('accepted' in (await s.acceptDelivery('d-2', { id: 'c5', repo: R, pull: 1, payload: null })));
      // An id no GitHub delivery has (spaces, too long) is not recorded: accepted every time.
      for (const odd of ['has space', 'x'.repeat(200)]) {
        assert.ok('accepted' in (await s.acceptDelivery(odd, { id: `c-${odd.length}-a`, repo: R, pull: 1, payload: null })));
        assert.ok('accepted' in (await s.acceptDelivery(odd, { id: `c-${odd.length}-b`, repo: R, pull: 1, payload: null })));
      }
    },
  );

  withStore('deliveries: a refused command goes with its delivery record, so the delivery sent again runs', async ({ store: s }) => {
    assert.ok('accepted' in (await s.acceptDelivery('d-9', { id: 'refused', repo: R, pull: 1, payload: null })));
    // Another command's drop never forgets this delivery.
    await s.dropRefusedCommand('someone-else', 'd-9');
    assert.deepEqual(await s.acceptDelivery('d-9', { id: 'again', repo: R, pull: 1, payload: null }), { replay: 'pending' });
    await s.dropRefusedCommand('refused', 'd-9');
    assert.deepEqual(await s.acceptedCommands(), []);
    const sent = await s.acceptDelivery('d-9', { id: 'resent', repo: R, pull: 1, payload: null });
    assert.ok('accepted' in sent);
    assert.deepEqual(
      (await s.acceptedCommands()).map((c) => c.id),
      ['resent'],
    );
  });

  withStore('deliveries: a command queued during a drain records its delivery; a replay is not queued again', async ({ store: s }) => {
    const id = await s.enqueue(R, 3, { n: 1 }, 'd-q');
    assert.equal(typeof id, 'number');
    assert.equal(await s.enqueue(R, 3, { n: 1 }, 'd-q'), undefined);
    assert.deepEqual(await s.acceptDelivery('d-q', { id: 'c', repo: R, pull: 3, payload: null }), { replay: 'handled' });
    assert.deepEqual(
      (await s.takeAll()).map((q) => q.id),
      [id],
    );
  });
}
