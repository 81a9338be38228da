import { expect } from 'chai';
import type { V1SelfSubjectAccessReview } from '@kubernetes/client-node';
import type { TargetClient } from '../../../../provider/clusters/target-client.js';
import { FakeClock } from '../../../../provider/core/clock.js';
import { TargetAuthorization } from '../../../../provider/reconcilers/target-authorization.js';

const KEY = 'ClusterTarget/c2';
const TARGET_KEY = 'Target/a/c2';
const USER = 'system:serviceaccount:home:c1';

/**
 * A ClusterTarget's client (a Target's in namespace `a` when `namespaced`) whose authorizer answers from `rights` (namespace -> allowed; '' for
 * every namespace), counting the reviews it gets. A namespace missing from `rights` fails its
 * review; `hang` ones never answer.
 */
function target(rights: Map<string, boolean>, o: { fingerprint?: string; hang?: Set<string>; namespaced?: boolean } = {}) {
  const asked: string[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  let whoAmI = 0;
  const client = {
    key: o.namespaced ? TARGET_KEY : KEY,
    ref: o.namespaced ? { kind: 'Target', namespace: 'a', name: 'c2' } : { kind: 'ClusterTarget', namespace: '', name: 'c2' },
    displayName: 'c2',
    fingerprint: o.fingerprint ?? 'fp1',
    self: false,
    authorization: {
      createSelfSubjectAccessReview: async ({ body }: { body: V1SelfSubjectAccessReview }) => {
        const namespace = body.spec.resourceAttributes?.namespace ?? '';
        expect(body.spec.resourceAttributes).to.include({ verb: 'create', resource: 'pods' });
        asked.push(namespace);
        if (o.hang?.has(namespace)) return new Promise<never>(() => undefined);
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        await new Promise((r) => setImmediate(r));
        inFlight--;
        const allowed = rights.get(namespace);
        if (allowed === undefined) throw new Error('unavailable');
        return { ...body, status: { allowed } };
      },
    },
    authentication: {
      createSelfSubjectReview: async () => {
        whoAmI++;
        return { status: { userInfo: { username: USER } } };
      },
    },
  } as unknown as TargetClient;
  return { client, asked, stats: () => ({ maxInFlight, whoAmI }) };
}

const advice = (namespace: string) =>
  `the cluster of ClusterTarget c2 does not authorize this source (user "${USER}") to create pods in namespace ${namespace}: create a Source in namespace ${namespace} of that cluster with spec.userName "${USER}", or a ClusterSource for every namespace`;

describe('TargetAuthorization', () => {
  let clock: FakeClock;
  let namespaces: string[];
  const make = (o: { maxNamespaces?: number; concurrency?: number } = {}) => new TargetAuthorization({ clock, namespaces: () => namespaces, ...o });

  beforeEach(() => {
    clock = new FakeClock(0);
    namespaces = ['a', 'b'];
  });

  it('asks once, cluster-wide, when a ClusterSource grants every namespace, and refuses none', async () => {
    const authz = make();
    const t = target(new Map([['', true]]));
    expect(await authz.refresh(t.client)).to.deep.equal({ clusterWide: true, namespaces: new Map() });
    expect(t.asked).to.deep.equal(['']);
    expect(authz.refuses(KEY, 'a')).to.equal(undefined);
    expect(authz.refuses(KEY, 'b')).to.equal(undefined);
  });

  it('without cluster-wide rights, asks for each opted-in namespace and refuses those without a Source, naming it', async () => {
    const authz = make();
    const t = target(
      new Map([
        ['', false],
        ['a', true],
        ['b', false],
      ]),
    );
    const rights = await authz.refresh(t.client);
    expect(rights).to.deep.equal({
      clusterWide: false,
      user: USER,
      namespaces: new Map([
        ['a', true],
        ['b', false],
      ]),
    });
    expect(t.asked.sort()).to.deep.equal(['', 'a', 'b']);
    expect(authz.refuses(KEY, 'a')).to.equal(undefined);
    expect(authz.refuses(KEY, 'b')).to.equal(advice('b'));
    // A namespace nobody asked about is unknown, so offered; so is another target.
    expect(authz.refuses(KEY, 'c')).to.equal(undefined);
    expect(authz.refuses('ClusterTarget/c3', 'b')).to.equal(undefined);
  });

  it('offers a refused namespace again on the first refresh after a Source is created there', async () => {
    const authz = make();
    const rights = new Map([
      ['', false],
      ['a', true],
      ['b', false],
    ]);
    const t = target(rights);
    await authz.refresh(t.client);
    expect(authz.refuses(KEY, 'b')).to.equal(advice('b'));
    rights.set('b', true);
    await authz.refresh(t.client);
    expect(authz.refuses(KEY, 'b')).to.equal(undefined);
    // The user is asked once per kubeconfig, not on every refresh...
    expect(t.stats().whoAmI).to.equal(1);
    // ...and again for a new one (it may be another identity).
    const other = target(rights, { fingerprint: 'fp2' });
    await authz.refresh(other.client);
    expect(other.stats().whoAmI).to.equal(1);
  });

  it('keeps a namespace whose delegate the bind saw refused off the target until the next refresh, which answers for it', async () => {
    const authz = make();
    const rights = new Map([['', true]]);
    const t = target(rights);
    expect(authz.refused(KEY, 'a', 'refused at bind'), 'not followed before a first refresh').to.equal(false);
    expect(authz.refuses(KEY, 'a')).to.equal(undefined);
    await authz.refresh(t.client);
    // The ClusterSource was deleted after that probe: the bind meets the 403 first.
    expect(authz.refused(KEY, 'a', 'refused at bind')).to.equal(true);
    expect(authz.refuses(KEY, 'a')).to.equal('refused at bind');
    rights.set('', false);
    rights.set('a', true); // a Source in a remains
    rights.set('b', false);
    await authz.refresh(t.client);
    expect(authz.refuses(KEY, 'a')).to.equal(undefined);
    expect(authz.refuses(KEY, 'b')).to.equal(advice('b'));
  });

  it('leaves unknown (offered) what the target would not answer, failed or late', async () => {
    const authz = make();
    const t = target(
      new Map([
        ['', false],
        ['a', false],
      ]),
      { hang: new Set(['b']) },
    );
    const refresh = authz.refresh(t.client);
    // Let the other reviews settle, then the hung one runs out of time.
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    clock.advance(5_000);
    const rights = await refresh;
    expect(rights.namespaces).to.deep.equal(new Map([['a', false]]));
    expect(authz.refuses(KEY, 'b')).to.equal(undefined);

    const failing = target(new Map());
    expect(await make().refresh(failing.client)).to.deep.equal({ namespaces: new Map() });
  });

  it('asks about maxNamespaces namespaces at most, concurrency at a time', async () => {
    namespaces = Array.from({ length: 50 }, (_, i) => `ns-${i}`);
    const authz = make({ maxNamespaces: 20, concurrency: 4 });
    const t = target(new Map([['', false], ...namespaces.map((n): [string, boolean] => [n, false])]));
    const rights = await authz.refresh(t.client);
    expect(rights.namespaces.size).to.equal(20);
    expect(t.asked).to.have.length(21);
    expect(t.stats().maxInFlight).to.equal(4);
    expect(authz.refuses(KEY, 'ns-19')).to.equal(advice('ns-19'));
    expect(authz.refuses(KEY, 'ns-20')).to.equal(undefined);
  });

  it("asks a namespaced Target's cluster one review, in the Target's namespace, and follows it from then on", async () => {
    const authz = make();
    // Cluster-wide and in `b` it would say yes: neither is asked, a Target serves namespace `a` only.
    const rights = new Map([
      ['', true],
      ['a', false],
      ['b', true],
    ]);
    const t = target(rights, { namespaced: true });
    expect(authz.refused(TARGET_KEY, 'a', 'refused at bind'), 'not followed before a first refresh').to.equal(false);
    expect(await authz.refresh(t.client)).to.deep.equal({ user: USER, namespaces: new Map([['a', false]]) });
    expect(t.asked).to.deep.equal(['a']);
    const targetAdvice = `the cluster of Target c2 does not authorize this source (user "${USER}") to create pods in namespace a: create a Source in namespace a of that cluster with spec.userName "${USER}"`;
    expect(authz.refuses(TARGET_KEY, 'a')).to.equal(targetAdvice);

    // The operator creates the Source: the next refresh offers the target again, one review again.
    rights.set('a', true);
    expect(await authz.refresh(t.client)).to.deep.equal({ user: USER, namespaces: new Map([['a', true]]) });
    expect(t.asked).to.deep.equal(['a', 'a']);
    expect(authz.refuses(TARGET_KEY, 'a')).to.equal(undefined);
    expect(t.stats().whoAmI, 'the user is asked only when a message names it, once per kubeconfig').to.equal(1);

    // Rights taken away between two probes: the bind meets the 403, and the Target is followed,
    // so its namespace is kept off until the next refresh rather than for the binder's back-off.
    expect(authz.refused(TARGET_KEY, 'a', 'refused at bind')).to.equal(true);
    expect(authz.refuses(TARGET_KEY, 'a')).to.equal('refused at bind');
    await authz.refresh(t.client);
    expect(authz.refuses(TARGET_KEY, 'a')).to.equal(undefined);

    // Allowed from the start: no user asked; a review that fails leaves it unknown, so offered.
    const fresh = target(new Map([['a', true]]), { namespaced: true });
    await make().refresh(fresh.client);
    expect(fresh.stats().whoAmI).to.equal(0);
    const failing = make();
    expect(await failing.refresh(target(new Map(), { namespaced: true }).client)).to.deep.equal({ namespaces: new Map() });
    expect(failing.refuses(TARGET_KEY, 'a')).to.equal(undefined);
  });

  it('forgets a target', async () => {
    const authz = make();
    await authz.refresh(
      target(
        new Map([
          ['', false],
          ['a', false],
        ]),
      ).client,
    );
    expect(authz.refuses(KEY, 'a')).to.not.equal(undefined);
    authz.forget(KEY);
    expect(authz.refuses(KEY, 'a')).to.equal(undefined);
    expect(authz.refused(KEY, 'a', 'x')).to.equal(false);
  });
});
