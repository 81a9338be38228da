import { expect } from 'chai';
import { getJson, kubectl, kubectlStdin, sandbox, uniqueName, waitFor } from '../e2e/support.js';
import { account, recorded, tally } from './report.js';
import { electedPod, metricsPort, status, theLeader, withTwoReplicasAnd } from './replicas.js';
import { Tarpit } from './tarpit.js';

/** Pods created after the takeover: half pinned to Target c1, half to Target c2. */
const PODS = 20;

/** A replica's `admiralty_target_ready` for Target `<ns>/tarpit` ('0', '1'), or undefined while it has none. */
async function tarpitReady(replica: number, ns: string): Promise<string | undefined> {
  try {
    const res = await fetch(`http://127.0.0.1:${metricsPort(replica)}/metrics`, { signal: AbortSignal.timeout(2000) });
    const line = `admiralty_target_ready{target="Target/${ns}/tarpit"} `;
    return (await res.text())
      .split('\n')
      .find((l) => l.startsWith(line))
      ?.slice(line.length);
  } catch {
    return undefined;
  }
}

/**
 * A Target that never answers (its server accepts connections and says nothing) is known to
 * both replicas when the leader dies: its caches never list. The replica that leads next must
 * delegate the pods of the targets that do answer, as the killed one did; a controller that
 * waited for every target's caches before it started would wait forever. Half the pods are
 * pinned to c1 and half to c2, so that each of the two is shown to work, not their sum.
 */
describe('two provider replicas: the leader dies while a Target never answers', function () {
  this.timeout(300_000);
  const ns = uniqueName('failover-unreachable');
  const tarpit = new Tarpit();
  before(async () => {
    await tarpit.listen();
  });
  after(async () => {
    tarpit.close();
    await kubectl('c1', 'delete', 'pods', '--all', '-n', ns, '--wait=false');
  });
  // After the hooks above: the namespace goes (its Target with it) once the tarpit is closed.
  withTwoReplicasAnd(ns);

  it('the replica that leads next delegates to c1 and to c2: of 20 pods pinned half to each, 10 Running with one delegate in c1 and 10 in c2, none lost or duplicated', async () => {
    const head = {
      scenario: 'leader SIGKILLed while a Target never answers',
      load: `${PODS} elected pods after the takeover, ${PODS / 2} pinned to c1 and ${PODS / 2} to c2`,
      faults: 'SIGKILL of the leading replica of 2; a Target whose server accepts and never answers',
    };
    await recorded(ns, head, async (row) => {
      await tarpit.addTarget(ns);
      // Both replicas have probed it (not ready), so both hold its caches, which never list.
      await waitFor('both replicas know the tarpit Target, not ready', 90_000, async () => (await Promise.all([0, 1].map((r) => tarpitReady(r, ns)))).every((r) => r === '0'));

      const leader = await theLeader();
      const killedAtMs = Date.now();
      sandbox.killProviderReplica('c1', leader, 'SIGKILL');
      let newLeader = -1;
      await waitFor('a replica leads again', 60_000, async () => {
        const codes = await Promise.all([0, 1].map((r) => status(metricsPort(r), '/leaderz')));
        newLeader = codes.indexOf(200);
        return newLeader >= 0;
      });
      const takeoverS = (Date.now() - killedAtMs) / 1000;
      row.outcome = `replica ${newLeader} led ${takeoverS.toFixed(1)} s after`;

      const createdAtMs = Date.now();
      const target = (i: number) => (i < PODS / 2 ? 'c1' : 'c2');
      const yaml = Array.from({ length: PODS }, (_, i) => electedPod(ns, `after-${target(i)}-${i}`, target(i))).join('---\n');
      const created = await kubectlStdin('c1', yaml, 'create', '-f', '-');
      expect(created.code, created.stderr).to.equal(0);
      await waitFor(`${PODS} pods Running with one delegate each`, 120_000, async () => (await account(ns)).running === PODS);
      const runningS = (Date.now() - createdAtMs) / 1000;
      console.log(`      replica ${newLeader} led ${takeoverS.toFixed(1)} s after replica ${leader} was killed; ${PODS} pods Running ${runningS.toFixed(1)} s after they were created`);
      row.outcome += `; all Running ${runningS.toFixed(1)} s after creation`;

      const last = await account(ns);
      Object.assign(row, tally(last, PODS));
      expect(last).to.deep.include({ proxies: PODS, running: PODS, lost: [], duplicated: [], orphans: [] });
      // Each cluster holds the delegates of the pods pinned to it, Running.
      for (const cluster of ['c1', 'c2']) {
        const delegates = (await getJson(cluster, 'pods', '-n', ns, '-l', 'multicluster.admiralty.io/parent-cluster-name=c1')).items as any[];
        const running = delegates.filter((d) => d.status?.phase === 'Running' && !d.metadata.deletionTimestamp);
        expect(running.map((d) => d.metadata.annotations?.['multicluster.admiralty.io/parent-name']).sort(), `Running delegates in ${cluster}`).to.deep.equal(
          Array.from({ length: PODS }, (_, i) => i)
            .filter((i) => target(i) === cluster)
            .map((i) => `after-${cluster}-${i}`)
            .sort(),
        );
      }
      // The killed replica comes back (as its Deployment would bring it) and is Ready, the
      // tarpit's caches unlisted: readiness waits for the source's caches only.
      await waitFor('both replicas Ready', 90_000, async () => (await Promise.all([0, 1].map((r) => status(metricsPort(r), '/readyz')))).every((c) => c === 200));
    });
  });
});
