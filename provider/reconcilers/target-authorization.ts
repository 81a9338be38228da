import type { TargetClient } from '../clusters/target-client.js';
import type { Clock } from '../core/clock.js';
import { sanitizeRemoteText } from '../core/redact.js';
import { explainRefusal, type PodRights } from '../model/refusal.js';

export interface TargetAuthorizationOptions {
  clock: Clock;
  /** The source namespaces whose pods may be placed (those opted in), read on every refresh of a ClusterTarget without cluster-wide rights. */
  namespaces: () => Iterable<string>;
  /** Namespaces asked about per target and refresh, at most (default 1000); the others stay unknown, so offered. */
  maxNamespaces?: number;
  /** Reviews in flight per refresh, at most (default 8). */
  concurrency?: number;
  /** Budget of one review (default 5 s); a review not answered in time leaves its namespace unknown. */
  reviewTimeoutMs?: number;
}

/** What is known of one target: its rights, and the filter's reason for each namespace it may not use. */
interface Known {
  fingerprint: string;
  rights: PodRights;
  /** Namespace -> why the filter keeps that namespace's pods off the target (built once per answer). */
  refused: Map<string, string>;
}

/**
 * Which namespaces of a target's cluster authorize our identity to create pods, so that the
 * extender's filter never offers a target to a pod whose delegate it would refuse (403), and a
 * refusal the bind meets keeps a namespace off only until the next probe.
 *
 * Asked of the target with SelfSubjectAccessReviews (`create pods`), which every authenticated
 * user may make and which never answer 403, so the e2e audit of refused requests stays strict.
 * For a ClusterTarget: first cluster-wide (a ClusterSource grants it: one review, and done), and
 * only without cluster-wide rights, once per opted-in namespace of the source (bounded by
 * `maxNamespaces`, `concurrency` at a time). For a namespaced Target, which serves the pods of
 * its own namespace only: one review, in that namespace (a ClusterSource answers it too).
 * {@link refresh} runs on the target registry's probe (every 10 s),
 * never on a scheduling request: {@link refuses}, called by the filter for every pod and
 * virtual node, is two map lookups. What is not known (never asked, a review that failed, a
 * namespace opted in since the last probe) is offered, as before this existed: the bind then
 * meets the 403 and reports it here ({@link refused}), so that pod and its namespace are kept
 * off until the next probe says otherwise, not for the binder's doubling back-off.
 *
 * In memory, per replica (every replica probes and filters). Bounded: one entry per target,
 * each holding at most `maxNamespaces` answers.
 */
export class TargetAuthorization {
  private readonly known = new Map<string, Known>();
  private readonly maxNamespaces: number;
  private readonly concurrency: number;
  private readonly reviewTimeoutMs: number;

  constructor(private readonly o: TargetAuthorizationOptions) {
    this.maxNamespaces = o.maxNamespaces ?? 1000;
    this.concurrency = o.concurrency ?? 8;
    this.reviewTimeoutMs = o.reviewTimeoutMs ?? 5_000;
  }

  /**
   * Why the pods of `namespace` may not go to the target, in the words of `explainRefusal`
   * (`SourceNotAuthorized`: the target, the namespace, the user, the Source or ClusterSource to
   * create), or undefined when they may or nobody knows. No I/O, no allocation.
   */
  refuses(targetKey: string, namespace: string): string | undefined {
    return this.known.get(targetKey)?.refused.get(namespace);
  }

  /**
   * Asks the target again, replacing all it said before, what the bind reported included (a new
   * kubeconfig may be a new identity, a Source may have been created). Never throws; reviews
   * that fail leave their answers unknown. Called by the target registry's probe of a Target or
   * ClusterTarget from a Secret, after its summary was read. A Target's answer has its own
   * namespace only, and no `clusterWide`.
   */
  async refresh(client: TargetClient): Promise<PodRights> {
    const previous = this.known.get(client.key);
    const namespaces = new Map<string, boolean>();
    // The user is asked once per kubeconfig, and only when a message will name it.
    let user = previous?.fingerprint === client.fingerprint ? previous.rights.user : undefined;
    let clusterWide: boolean | undefined;
    if (client.ref.kind === 'Target') {
      // Its pods are those of its namespace: one question, whatever grants the answer.
      const allowed = await this.mayCreatePods(client, client.ref.namespace);
      if (allowed !== undefined) namespaces.set(client.ref.namespace, allowed);
      if (allowed === false) user ??= await this.whoAmI(client);
    } else {
      clusterWide = await this.mayCreatePods(client, undefined);
      if (clusterWide === false) {
        await this.askNamespaces(client, namespaces);
        user ??= await this.whoAmI(client);
      }
    }
    const rights: PodRights = { namespaces, ...(clusterWide !== undefined ? { clusterWide } : {}), ...(user ? { user } : {}) };
    const refused = new Map<string, string>();
    for (const [namespace, allowed] of namespaces) if (!allowed) refused.set(namespace, this.reason(client, namespace, user));
    this.known.set(client.key, { fingerprint: client.fingerprint, rights, refused });
    return rights;
  }

  /** Asks about each opted-in namespace of the source, `maxNamespaces` at most, `concurrency` at a time, into `answers`. */
  private async askNamespaces(client: TargetClient, answers: Map<string, boolean>): Promise<void> {
    const wanted: string[] = [];
    for (const namespace of this.o.namespaces()) {
      if (wanted.length >= this.maxNamespaces) break;
      wanted.push(namespace);
    }
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < wanted.length) {
        const namespace = wanted[next++]!;
        const allowed = await this.mayCreatePods(client, namespace);
        if (allowed !== undefined) answers.set(namespace, allowed);
      }
    };
    await Promise.all([...Array(Math.min(this.concurrency, wanted.length))].map(worker));
  }

  /**
   * The bind met a 403 that the target's authorizer confirmed (`SourceNotAuthorized`) for a pod
   * of `namespace`: its pods are refused with `reason` until the next {@link refresh}, which
   * replaces that with the target's answer. Returns whether this target is followed here (a Target
   * or ClusterTarget from a Secret, probed at least once); if not, the caller keeps its own back-off.
   */
  refused(targetKey: string, namespace: string, reason: string): boolean {
    const known = this.known.get(targetKey);
    if (!known) return false;
    known.refused.set(namespace, reason);
    return true;
  }

  /** Forgets a target (deleted, or no longer probed for this). */
  forget(targetKey: string): void {
    this.known.delete(targetKey);
  }

  private reason(client: TargetClient, namespace: string, user: string | undefined): string {
    const refusal = explainRefusal(client, { kind: 'pod', namespace }, { kind: 'Forbidden', targetMessage: '', authorized: false, ...(user ? { user } : {}) });
    return refusal!.message;
  }

  /** A SelfSubjectAccessReview for `create pods` (in every namespace when `namespace` is undefined); undefined when it failed. */
  private async mayCreatePods(client: TargetClient, namespace: string | undefined): Promise<boolean | undefined> {
    try {
      const review = await this.withTimeout(
        client.authorization.createSelfSubjectAccessReview({
          body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: { resourceAttributes: { verb: 'create', resource: 'pods', ...(namespace ? { namespace } : {}) } } },
        }),
      );
      const allowed = review.status?.allowed;
      return typeof allowed === 'boolean' ? allowed : undefined;
    } catch {
      return undefined;
    }
  }

  /** Who the target says we are (SelfSubjectReview), sanitized; undefined when it would not say. */
  private async whoAmI(client: TargetClient): Promise<string | undefined> {
    try {
      const review = await this.withTimeout(client.authentication.createSelfSubjectReview({ body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } }));
      const user = review.status?.userInfo?.username;
      return user ? sanitizeRemoteText(user) : undefined;
    } catch {
      return undefined;
    }
  }

  private withTimeout<T>(p: Promise<T>): Promise<T> {
    let timer: ReturnType<Clock['setTimeout']> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = this.o.clock.setTimeout(() => reject(new Error(`no answer within ${this.reviewTimeoutMs} ms`)), this.reviewTimeoutMs);
    });
    return Promise.race([p, timeout]).finally(() => timer && this.o.clock.clearTimeout(timer));
  }
}
