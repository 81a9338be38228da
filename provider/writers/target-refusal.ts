import type { TargetClient } from '../clusters/target-client.js';
import { apiErrorIn, classifyApiError, NotDelegatedError, statusMessage } from '../core/errors.js';
import { sanitizeRemoteText } from '../core/redact.js';
import { explainRefusal, WRITE_RESOURCE, type RefusalFacts, type RefusedWrite } from '../model/refusal.js';

/**
 * The failure of a write into `target` as a {@link NotDelegatedError} (see `explainRefusal` for
 * the reasons), or undefined when it is not a refusal the pod's owner can act on (the caller
 * then retries it as an error). `err` may wrap the API error.
 *
 * A 403 says only that the target refused; whether its authorizer did (no Source there for us)
 * or its admission (PodSecurity, a quota, a webhook) is asked of the target with a
 * SelfSubjectAccessReview for that very write, and a SelfSubjectReview names us in the message.
 * Every authenticated user may make both, so this needs no right of its own. Best effort: a
 * review that fails leaves the target's own message. Called only after a refusal, so the two
 * reviews cost nothing on the path that works.
 */
export async function refusalOf(target: TargetClient, write: RefusedWrite, err: unknown): Promise<NotDelegatedError | undefined> {
  const api = apiErrorIn(err);
  const kind = api === undefined ? undefined : classifyApiError(api);
  if (kind !== 'NotFound' && kind !== 'Forbidden' && kind !== 'Invalid') return undefined;
  const facts: RefusalFacts = { kind, targetMessage: statusMessage(api) };
  if (kind === 'Forbidden') {
    const [access, self] = await Promise.allSettled([
      (async () =>
        target.authorization.createSelfSubjectAccessReview({
          body: {
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SelfSubjectAccessReview',
            spec: { resourceAttributes: { verb: 'create', resource: WRITE_RESOURCE[write.kind], namespace: write.namespace } },
          },
        }))(),
      (async () => target.authentication.createSelfSubjectReview({ body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } }))(),
    ]);
    if (access.status === 'fulfilled' && typeof access.value.status?.allowed === 'boolean') facts.authorized = access.value.status.allowed;
    const user = self.status === 'fulfilled' ? self.value.status?.userInfo?.username : undefined;
    if (user) facts.user = sanitizeRemoteText(user);
  }
  const refusal = explainRefusal(target, write, facts);
  return refusal && new NotDelegatedError(refusal.reason, refusal.message, { cause: err });
}
