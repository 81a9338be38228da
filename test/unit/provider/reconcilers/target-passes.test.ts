import { expect } from 'chai';
import type { TargetHealth } from '../../../../provider/clusters/cluster-registry.js';
import type { TargetClient } from '../../../../provider/clusters/target-client.js';
import { TargetPasses } from '../../../../provider/reconcilers/target-passes.js';

const target = (name: string) => ({ key: `ClusterTarget/${name}`, displayName: name }) as unknown as TargetClient;
const unreachable: TargetHealth = { ready: false, reason: 'TargetUnreachable', message: 'timeout', sinceMs: 0 };
const forbidden: TargetHealth = { ready: false, reason: 'TargetForbidden', message: 'no Source', sinceMs: 0 };

describe('TargetPasses', () => {
  const setup = (healths: Record<string, TargetHealth>) => new TargetPasses((key) => healths[key.split('/')[1]!]);

  it('passes over a target in an outage only, and owes it each key once', async () => {
    const healths: Record<string, TargetHealth> = { a: unreachable, b: forbidden };
    const passes = setup(healths);
    const visited: string[] = [];
    for (const key of ['ns/x', 'ns/y', 'ns/x']) await passes.each(key, [target('a'), target('b'), target('c')], async (t) => void visited.push(`${key}@${t.displayName}`));
    // A configuration problem is not an outage: its calls answer at once.
    expect(visited).to.deep.equal(['ns/x@b', 'ns/x@c', 'ns/y@b', 'ns/y@c', 'ns/x@b', 'ns/x@c']);
    expect(passes.owedTo('ClusterTarget/a')).to.equal(2);
    expect(passes.wake('ClusterTarget/a')).to.deep.equal([]);
    delete healths.a;
    expect(passes.wake('ClusterTarget/a')).to.deep.equal(['ns/x', 'ns/y']);
    expect(passes.wake('ClusterTarget/a')).to.deep.equal([]);
  });

  it('gives the keys back when the clients go, in an outage or not', async () => {
    const passes = setup({ a: unreachable });
    await passes.each('ns/x', [target('a')], async () => undefined);
    expect(passes.drop('ClusterTarget/a')).to.deep.equal(['ns/x']);
    expect(passes.owedTo('ClusterTarget/a')).to.equal(0);
  });

  it('runs every pass before it throws: the one error as it is, several as one that counts them', async () => {
    const passes = setup({});
    const boom = new Error('boom in a');
    const visited: string[] = [];
    let thrown: unknown;
    await passes
      .each('k', [target('a'), target('b')], async (t) => {
        visited.push(t.displayName);
        if (t.displayName === 'a') throw boom;
      })
      .catch((err) => (thrown = err));
    expect(thrown).to.equal(boom);
    expect(visited).to.deep.equal(['a', 'b']);

    thrown = undefined;
    await passes
      .each('k', [target('a'), target('b'), target('c')], async (t) => {
        if (t.displayName !== 'b') throw new Error(`boom in ${t.displayName}`);
      })
      .catch((err) => (thrown = err));
    expect((thrown as Error).message).to.equal('2 targets failed, the first: boom in a');
    expect((thrown as Error).cause)
      .to.be.an('error')
      .with.property('message', 'boom in a');
  });
});
