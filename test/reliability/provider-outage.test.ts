import { expect } from 'chai';
import { apply, connectNamespace, disconnectNamespace, electedDeployment, kubectl, sandbox, settleTeardowns, uniqueName, waitFor } from '../e2e/support.js';
import { account, recorded, tally } from './report.js';

/** How long c1's provider stays down (the issue's scenario: 2 minutes). */
const OUTAGE_S = Number(process.env.RELIABILITY_PROVIDER_OUTAGE_S ?? 120);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * c1's provider (webhook, extender, controllers) stopped while pods come and go: a Deployment
 * scaled down and up, and pods deleted by hand. On its return it converges: every replica
 * Running with exactly one delegate, no delegate left for a pod that went, no status lost.
 */
describe('reliability: the provider stopped while pods come and go', function () {
  const ns = uniqueName('rel-down');
  before(async () => {
    await connectNamespace(ns);
  });
  after(async () => {
    await sandbox.start('c1', 'provider').catch(() => undefined);
    await kubectl('c1', 'delete', 'deployment', '--all', '-n', ns, '--wait=false');
    // Wholly, before the next scenario stops something a background teardown would need.
    await disconnectNamespace(ns);
    await settleTeardowns();
  });

  it('converges once it is back: the 40 proxies the Deployment then has each run with exactly one delegate; none lost, no delegate left for a pod that went', async () => {
    const head = { scenario: 'provider stopped while pods come and go', load: '30 replicas; scaled to 20, 5 deleted, scaled to 40 meanwhile', faults: `c1's provider down ${OUTAGE_S} s` };
    await recorded(ns, head, async (row) => {
      // The pods' own grace period (the default 30 s), as before the helper was shared.
      await apply('c1', electedDeployment('web', ns, 30, '10m', { spec: { terminationGracePeriodSeconds: 30 } }));
      await waitFor('30 replicas Running with one delegate each', 180_000, async () => (await account(ns)).running === 30);

      await sandbox.stop('c1', 'provider');
      const downAt = Date.now();
      // Scale down (proxies wait on their finalizers), delete some by hand, then scale up (the
      // webhook is down, so the ReplicaSet's creations are refused and retried).
      await kubectl('c1', 'scale', 'deployment', 'web', '-n', ns, '--replicas=20');
      const some = (await kubectl('c1', 'get', 'pods', '-n', ns, '-l', 'app=web', '-o', 'name')).trim().split('\n').slice(0, 5);
      await kubectl('c1', 'delete', '-n', ns, '--wait=false', ...some);
      await sleep(Math.max(0, (OUTAGE_S * 1000) / 2 - (Date.now() - downAt)));
      await kubectl('c1', 'scale', 'deployment', 'web', '-n', ns, '--replicas=40');
      await sleep(Math.max(0, OUTAGE_S * 1000 - (Date.now() - downAt)));

      await sandbox.start('c1', 'provider');
      const upAt = Date.now();
      let last = await account(ns);
      await waitFor('40 replicas Running with one delegate each, no orphan', 300_000, async () => {
        last = await account(ns);
        return last.proxies === 40 && last.running === 40 && last.orphans.length === 0;
      }).catch(() => undefined);
      const convergedS = ((Date.now() - upAt) / 1000).toFixed(0);
      const ok = last.proxies === 40 && last.running === 40 && last.lost.length === 0 && last.duplicated.length === 0 && last.orphans.length === 0;
      row.outcome = ok ? `converged ${convergedS} s after its return` : `not converged: ${last.running}/${last.proxies} Running`;
      Object.assign(row, tally(last, 40));
      expect(last, JSON.stringify(last)).to.deep.include({ proxies: 40, running: 40, lost: [], duplicated: [], orphans: [] });
    });
  });
});
