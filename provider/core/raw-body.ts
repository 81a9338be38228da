import { Observable, type ConfigurationOptions, type ObservableMiddleware } from '@kubernetes/client-node';

/**
 * Options for a write whose body holds fields the generated client does not know (its typed
 * serializer keeps only the fields of its models, so a pod's `spec.schedulingGroup`, Kubernetes
 * 1.36's, would be dropped on the way): the request is sent with `body` as plain JSON instead of
 * the serializer's copy. Adds to `opts` as `unreadAnswer` does.
 */
export function rawBody(body: unknown, opts?: ConfigurationOptions<ObservableMiddleware>): ConfigurationOptions<ObservableMiddleware> {
  const json = JSON.stringify(body);
  const middleware: ObservableMiddleware = {
    pre: (request) => {
      request.setBody(json);
      return new Observable(Promise.resolve(request));
    },
    post: (response) => new Observable(Promise.resolve(response)),
  };
  return { ...opts, middleware: [middleware, ...(opts?.middleware ?? [])], middlewareMergeStrategy: 'append' };
}
