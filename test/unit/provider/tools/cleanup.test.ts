import { expect } from 'chai';
import { cleanupCli, finalizerPatch, removeOurFinalizers, stripOurFinalizers, type FinalizerResource, type ObjectMeta } from '../../../../provider/tools/cleanup.js';
import { FOLLOW_FINALIZER, HAS_FINALIZER_LABEL, PROXY_FINALIZER } from '../../../../provider/core/keys.js';
import { bareApiError } from '../../../support/api-errors.js';

/** An in-memory kind that applies JSON patches the way the API server does (test, replace, remove). */
class FakeResource implements FinalizerResource {
  readonly objects = new Map<string, ObjectMeta & { labels?: Record<string, string> }>();
  readonly patches: { name: string; patch: object[]; dryRun: boolean }[] = [];
  /** Called before each patch is applied: lets a test change the object "concurrently" or fail. */
  beforePatch: (name: string, attempt: number) => void = () => {};
  listError?: Error;

  constructor(readonly kind: string) {}

  add(name: string, finalizers: string[], labelled = false): void {
    this.objects.set(name, { name, namespace: 'ns', uid: `uid-${name}`, finalizers, labels: labelled ? { [HAS_FINALIZER_LABEL]: 'true' } : {} });
  }

  async list(labelSelector?: string): Promise<ObjectMeta[]> {
    if (this.listError) throw this.listError;
    return [...this.objects.values()].filter((o) => !labelSelector || o.labels?.[labelSelector] !== undefined).map((o) => structuredClone(o));
  }

  async get(_ns: string | undefined, name: string): Promise<ObjectMeta> {
    const o = this.objects.get(name);
    if (!o) throw bareApiError(404);
    return structuredClone(o);
  }

  async patch(_ns: string | undefined, name: string, patch: object[], dryRun: boolean): Promise<void> {
    this.patches.push({ name, patch, dryRun });
    this.beforePatch(name, this.patches.filter((p) => p.name === name).length);
    const o = this.objects.get(name);
    if (!o) throw bareApiError(404);
    const [test, change, ...rest] = patch as [{ value: string[] }, { op: string; value?: string[] }, ...{ op: string; path: string }[]];
    if (JSON.stringify(o.finalizers ?? []) !== JSON.stringify(test.value)) throw bareApiError(422);
    const labelRemovals = rest.map((op) => decodeURIComponent(op.path.replace('/metadata/labels/', '')).replace(/~1/g, '/').replace(/~0/g, '~'));
    // Removing a missing path fails the whole patch, as on the API server.
    if (labelRemovals.some((k) => o.labels?.[k] === undefined)) throw bareApiError(422);
    if (dryRun) return;
    o.finalizers = change.op === 'remove' ? undefined : change.value;
    for (const k of labelRemovals) delete o.labels![k];
  }
}

const run = (labelledFirst: FinalizerResource[], fullScan: FinalizerResource[], dryRun = false) => {
  const lines: string[] = [];
  return removeOurFinalizers({ labelledFirst, fullScan }, { dryRun, say: (l) => lines.push(l), sleep: async () => {} }).then((report) => ({ report, lines }));
};

describe('cleanup', () => {
  describe('stripOurFinalizers', () => {
    const cases: [string, string[], string[] | null][] = [
      ['none at all', [], null],
      ['only foreign ones', ['kubernetes', 'example.com/x'], null],
      ['only ours', [PROXY_FINALIZER, FOLLOW_FINALIZER], []],
      ['a legacy per-target one', ['multicluster.admiralty.io/default-c2'], []],
      ['mixed, keeping order of the others', ['a/b', FOLLOW_FINALIZER, 'c/d', 'multicluster.admiralty.io/multiclusterForegroundDeletion'], ['a/b', 'c/d']],
      ['a look-alike prefix', ['multicluster.admiralty.io.evil/x', 'admiralty.io/x'], null],
    ];
    for (const [why, input, want] of cases) {
      it(`${why}: ${JSON.stringify(input)} -> ${JSON.stringify(want)}`, () => {
        expect(stripOurFinalizers(input)).to.deep.equal(want);
      });
    }
    it('does not change its input', () => {
      const input = [FOLLOW_FINALIZER, 'a/b'];
      stripOurFinalizers(input);
      expect(input).to.deep.equal([FOLLOW_FINALIZER, 'a/b']);
    });
  });

  describe('finalizerPatch', () => {
    it('tests the current list, then replaces it', () => {
      expect(finalizerPatch([FOLLOW_FINALIZER, 'a/b'], ['a/b'])).to.deep.equal([
        { op: 'test', path: '/metadata/finalizers', value: [FOLLOW_FINALIZER, 'a/b'] },
        { op: 'replace', path: '/metadata/finalizers', value: ['a/b'] },
      ]);
    });
    it('removes the field when nothing is left', () => {
      expect(finalizerPatch([FOLLOW_FINALIZER], [])[1]).to.deep.equal({ op: 'remove', path: '/metadata/finalizers' });
    });
    it('drops the has-finalizer label when asked, with the slash of its key escaped', () => {
      expect(finalizerPatch([FOLLOW_FINALIZER], [], true)[2]).to.deep.equal({ op: 'remove', path: '/metadata/labels/multicluster.admiralty.io~1has-finalizer' });
      expect(finalizerPatch([FOLLOW_FINALIZER], [])).to.have.length(2);
    });
  });

  describe('removeOurFinalizers', () => {
    it('cleans labelled objects first, then the rest, each once, keeping foreign finalizers', async () => {
      const cms = new FakeResource('configmap');
      cms.add('labelled', [FOLLOW_FINALIZER], true);
      cms.add('unlabelled', ['a/b', FOLLOW_FINALIZER]);
      cms.add('foreign', ['a/b']);
      cms.add('bare', []);
      const { report, lines } = await run([cms], [cms]);
      expect(cms.patches.map((p) => p.name)).to.deep.equal(['labelled', 'unlabelled']);
      expect(cms.objects.get('labelled')!.finalizers).to.equal(undefined);
      expect(cms.objects.get('unlabelled')!.finalizers).to.deep.equal(['a/b']);
      expect(cms.objects.get('foreign')!.finalizers).to.deep.equal(['a/b']);
      // The label said "has our finalizer": it leaves with the finalizer.
      expect(cms.objects.get('labelled')!.labels).to.deep.equal({});
      expect(report).to.deep.equal({ changed: 2, finalizersRemoved: 2, failed: 0, skippedKinds: [] });
      expect(lines).to.deep.equal([`configmap ns/labelled: removed ${FOLLOW_FINALIZER}`, `configmap ns/unlabelled: removed ${FOLLOW_FINALIZER}`]);
    });

    it('is idempotent', async () => {
      const pods = new FakeResource('pod');
      pods.add('p', [PROXY_FINALIZER], true);
      await run([pods], [pods]);
      const { report } = await run([pods], [pods]);
      expect(report.changed).to.equal(0);
      expect(pods.patches).to.have.length(1);
    });

    it('in a dry run, asks the server to validate and keeps everything', async () => {
      const secrets = new FakeResource('secret');
      secrets.add('s', [FOLLOW_FINALIZER, PROXY_FINALIZER]);
      const { report, lines } = await run([], [secrets], true);
      expect(secrets.patches.map((p) => p.dryRun)).to.deep.equal([true]);
      expect(secrets.objects.get('s')!.finalizers).to.deep.equal([FOLLOW_FINALIZER, PROXY_FINALIZER]);
      expect(report).to.include({ changed: 1, finalizersRemoved: 2 });
      expect(lines).to.deep.equal([`secret ns/s: would remove ${FOLLOW_FINALIZER}, ${PROXY_FINALIZER}`]);
    });

    it('re-reads and patches again when the finalizers changed meanwhile, never dropping the new one', async () => {
      const svcs = new FakeResource('service');
      svcs.add('s', [FOLLOW_FINALIZER]);
      svcs.beforePatch = (name, attempt) => {
        if (attempt === 1) svcs.objects.get(name)!.finalizers = [FOLLOW_FINALIZER, 'someone.else/new'];
      };
      const { report } = await run([], [svcs]);
      expect(svcs.patches).to.have.length(2);
      expect(svcs.objects.get('s')!.finalizers).to.deep.equal(['someone.else/new']);
      expect(report).to.include({ changed: 1, failed: 0 });
    });

    it('is done when the object is deleted meanwhile (its last finalizer removed by someone else)', async () => {
      const cms = new FakeResource('configmap');
      cms.add('gone', [FOLLOW_FINALIZER]);
      cms.beforePatch = (name) => cms.objects.delete(name);
      const { report, lines } = await run([], [cms]);
      expect(report).to.include({ changed: 0, failed: 0 });
      expect(lines).to.deep.equal([]);
    });

    it('stops when someone else removed our finalizers meanwhile', async () => {
      const cms = new FakeResource('configmap');
      cms.add('c', [FOLLOW_FINALIZER, 'a/b']);
      cms.beforePatch = (name, attempt) => {
        if (attempt === 1) cms.objects.get(name)!.finalizers = ['a/b'];
      };
      const { report } = await run([], [cms]);
      expect(cms.patches).to.have.length(1);
      expect(report).to.include({ changed: 0, failed: 0 });
    });

    it('retries server errors, then reports a failure and goes on with the other objects', async () => {
      const pods = new FakeResource('pod');
      pods.add('a', [PROXY_FINALIZER]);
      pods.add('b', [PROXY_FINALIZER]);
      pods.beforePatch = (name) => {
        if (name === 'a') throw bareApiError(503);
      };
      const { report, lines } = await run([], [pods]);
      expect(pods.patches.filter((p) => p.name === 'a')).to.have.length(6);
      expect(pods.objects.get('b')!.finalizers).to.equal(undefined);
      expect(report).to.include({ changed: 1, failed: 1 });
      expect(lines[0]).to.match(/^pod ns\/a: FAILED: ServerError/);
    });

    it('does not loop on a patch the server rejects for good', async () => {
      const pods = new FakeResource('pod');
      pods.add('a', [PROXY_FINALIZER]);
      pods.beforePatch = () => {
        throw bareApiError(422);
      };
      const { report } = await run([], [pods]);
      expect(pods.patches).to.have.length(1);
      expect(report.failed).to.equal(1);
    });

    it('does not retry a forbidden patch', async () => {
      const pods = new FakeResource('pod');
      pods.add('a', [PROXY_FINALIZER]);
      pods.beforePatch = () => {
        throw bareApiError(403);
      };
      const { report, lines } = await run([], [pods]);
      expect(pods.patches).to.have.length(1);
      expect(report.failed).to.equal(1);
      expect(lines[0]).to.match(/Forbidden/);
    });

    it('skips a kind it cannot list (a CRD not installed), once, and goes on', async () => {
      const targets = new FakeResource('target');
      targets.listError = bareApiError(404);
      const cms = new FakeResource('configmap');
      cms.add('c', [FOLLOW_FINALIZER]);
      const { report, lines } = await run([targets], [targets, cms]);
      expect(report.skippedKinds).to.deep.equal(['target']);
      expect(report.changed).to.equal(1);
      expect(lines.filter((l) => l.startsWith('targets: skipped'))).to.have.length(1);
    });
  });

  describe('cleanupCli', () => {
    const io = () => {
      let out = '';
      let err = '';
      return { stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) }, out: () => out, err: () => err };
    };
    it('exits 2 with the usage on an unknown flag', async () => {
      const i = io();
      expect(await cleanupCli(['--force'], i)).to.equal(2);
      expect(i.err()).to.include('usage: admiralty cleanup');
    });
    it('exits 1 with a message when the kubeconfig is missing', async () => {
      const i = io();
      expect(await cleanupCli(['--kubeconfig', '/nonexistent/kubeconfig'], i)).to.equal(1);
      expect(i.err()).to.match(/kubeconfig \/nonexistent\/kubeconfig does not exist/);
    });
    it('prints the help with --help', async () => {
      const i = io();
      expect(await cleanupCli(['--help'], i)).to.equal(0);
      expect(i.out()).to.include('--dry-run');
    });
  });
});
