import type { CoordinationV1Api, V1Lease, V1LeaseList } from '@kubernetes/client-node';
import { bareApiError } from './api-errors.js';

/**
 * Leases in memory, shared by several replicas' clients, with the API server's checks: a create
 * of an existing name is 409, a replace with a stale resourceVersion is 409, a delete's
 * preconditions are checked. `client(name)` is one replica's CoordinationV1Api; cutting it off
 * (`partition`) makes its calls fail as a network error would, or never answer (`hang`).
 */
export class FakeLeaseStore {
  readonly leases = new Map<string, V1Lease>();
  private rv = 0;
  private uid = 0;
  readonly writes = new Map<string, number>();
  private readonly cut = new Map<string, 'fail' | 'hang'>();

  /** Cuts `client` off: its calls fail as a refused connection does, or never answer. */
  partition(client: string, how: 'fail' | 'hang'): void {
    this.cut.set(client, how);
  }

  /** Ends every partition (calls already hung stay hung). */
  heal(): void {
    this.cut.clear();
  }

  get(namespace: string, name: string): V1Lease | undefined {
    return this.leases.get(`${namespace}/${name}`);
  }

  /** Writes `lease` as someone else would (an operator, a replica of another version). */
  put(lease: V1Lease): V1Lease {
    const key = `${lease.metadata!.namespace}/${lease.metadata!.name}`;
    const stored = { ...structuredClone(lease), metadata: { ...lease.metadata, uid: this.leases.get(key)?.metadata?.uid ?? `uid-${++this.uid}`, resourceVersion: String(++this.rv) } };
    this.leases.set(key, stored);
    return structuredClone(stored);
  }

  client(name: string): CoordinationV1Api {
    const gate = async () => {
      const how = this.cut.get(name);
      if (how === 'hang') await new Promise(() => {});
      if (how === 'fail') throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    };
    const wrote = () => this.writes.set(name, (this.writes.get(name) ?? 0) + 1);
    const api = {
      readNamespacedLease: async ({ name: n, namespace }: { name: string; namespace: string }) => {
        await gate();
        const lease = this.get(namespace, n);
        if (!lease) throw bareApiError(404);
        return structuredClone(lease);
      },
      listNamespacedLease: async ({ namespace, labelSelector }: { namespace: string; labelSelector?: string }): Promise<V1LeaseList> => {
        await gate();
        const [key, value] = (labelSelector ?? '').split('=');
        const items = [...this.leases.values()].filter((l) => l.metadata?.namespace === namespace && (!key || l.metadata?.labels?.[key] === value));
        return { items: structuredClone(items), metadata: { resourceVersion: String(this.rv) } };
      },
      createNamespacedLease: async ({ namespace, body }: { namespace: string; body: V1Lease }) => {
        await gate();
        if (this.get(namespace, body.metadata!.name!)) throw bareApiError(409, 'AlreadyExists');
        wrote();
        return this.put({ ...body, metadata: { ...body.metadata, namespace } });
      },
      replaceNamespacedLease: async ({ name: n, namespace, body }: { name: string; namespace: string; body: V1Lease }) => {
        await gate();
        const lease = this.get(namespace, n);
        if (!lease) throw bareApiError(404);
        if (body.metadata?.resourceVersion !== lease.metadata?.resourceVersion) throw bareApiError(409, 'Conflict');
        wrote();
        return this.put(body);
      },
      deleteNamespacedLease: async ({ name: n, namespace, body }: { name: string; namespace: string; body?: { preconditions?: { uid?: string; resourceVersion?: string } } }) => {
        await gate();
        const lease = this.get(namespace, n);
        if (!lease) throw bareApiError(404);
        const pre = body?.preconditions;
        if ((pre?.uid && pre.uid !== lease.metadata?.uid) || (pre?.resourceVersion && pre.resourceVersion !== lease.metadata?.resourceVersion)) throw bareApiError(409, 'Conflict');
        wrote();
        this.leases.delete(`${namespace}/${n}`);
        return {};
      },
    };
    return api as unknown as CoordinationV1Api;
  }
}
