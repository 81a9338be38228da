import { Observable, ResponseContext, type ConfigurationOptions, type ObservableMiddleware } from '@kubernetes/client-node';

/** What the generated client deserializes instead of an answer nobody reads: an empty object. */
const EMPTY_ANSWER = '{}';

/**
 * A successful answer, read to its end (so that its keep-alive connection goes back to the
 * pool) and replaced with an empty object; any other answer is left as it is, so that errors
 * keep their Status (AlreadyExists, Conflict, NotFound...) for `classifyApiError`.
 */
async function dropSuccessfulAnswer(response: ResponseContext): Promise<ResponseContext> {
  if (response.httpStatusCode < 200 || response.httpStatusCode > 299) return response;
  await response.body.binary();
  return new ResponseContext(response.httpStatusCode, response.headers, { text: async () => EMPTY_ANSWER, binary: async () => Buffer.from(EMPTY_ANSWER) });
}

const UNREAD_ANSWER: ObservableMiddleware = {
  pre: (request) => new Observable(Promise.resolve(request)),
  post: (response) => new Observable(dropSuccessfulAnswer(response)),
};

/**
 * Options for an API call whose answer, on success, nobody reads (a create or a patch that is
 * fire and forget: the informers bring the object back anyway): the generated client then
 * deserializes an empty object instead of the whole object the apiserver returns, which its
 * typed serializer walks field by field (with a pod, about as much CPU as the informer's parse
 * of the same object). The call resolves with an empty object (cast to its declared type: do
 * not read it); a failure throws exactly as without these options. Adds to `opts` (say,
 * `setHeaderOptions`' Content-Type), in the same manner.
 */
export function unreadAnswer(opts?: ConfigurationOptions<ObservableMiddleware>): ConfigurationOptions<ObservableMiddleware> {
  return { ...opts, middleware: [...(opts?.middleware ?? []), UNREAD_ANSWER], middlewareMergeStrategy: 'append' };
}

/**
 * Who the object in a successful answer is (kind, apiVersion, and of its metadata the name,
 * namespace, uid and resourceVersion), as JSON; a body that is not a JSON object is left as it
 * is, for the generated client to fail on as before.
 */
function identityOf(text: string): string {
  let object: unknown;
  try {
    object = JSON.parse(text);
  } catch {
    return text;
  }
  if (!object || typeof object !== 'object' || Array.isArray(object)) return text;
  const { apiVersion, kind, metadata } = object as { apiVersion?: unknown; kind?: unknown; metadata?: Record<string, unknown> };
  const m = metadata && typeof metadata === 'object' ? metadata : {};
  return JSON.stringify({ apiVersion, kind, metadata: { name: m.name, namespace: m.namespace, uid: m.uid, resourceVersion: m.resourceVersion } });
}

const IDENTITY_ANSWER: ObservableMiddleware = {
  pre: (request) => new Observable(Promise.resolve(request)),
  post: (response) =>
    new Observable(
      (async () => {
        if (response.httpStatusCode < 200 || response.httpStatusCode > 299) return response;
        const identity = identityOf(await response.body.text());
        return new ResponseContext(response.httpStatusCode, response.headers, { text: async () => identity, binary: async () => Buffer.from(identity) });
      })(),
    ),
};

/**
 * Options for an API call whose caller reads only who the object it wrote is (a create that
 * needs the server's uid): the call resolves with the object's kind, apiVersion, and metadata
 * name, namespace, uid and resourceVersion, nothing else; the generated client's typed walk of
 * the whole object is skipped (one plain parse instead). Failures throw as without it.
 */
export function identityAnswer(opts?: ConfigurationOptions<ObservableMiddleware>): ConfigurationOptions<ObservableMiddleware> {
  return { ...opts, middleware: [...(opts?.middleware ?? []), IDENTITY_ANSWER], middlewareMergeStrategy: 'append' };
}
