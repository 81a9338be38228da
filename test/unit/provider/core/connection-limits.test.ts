import { expect } from 'chai';
import { DEFAULT_CONNECTION_LIMITS } from '../../../../provider/core/connection-limits.js';
import { WEBHOOK_CONNECTION_LIMITS } from '../../../../webhook/create-webhook-server.js';

describe('DEFAULT_CONNECTION_LIMITS', () => {
  it("keeps an idle connection longer than the apiserver's clients do (Go's 90 s), so they close it first", () => {
    // A server that closes first races the client reusing the connection: the webhook call
    // fails with "connection reset by peer" and, with failurePolicy Fail, the pod is refused.
    expect(DEFAULT_CONNECTION_LIMITS.keepAliveTimeoutMs).to.be.above(90_000);
  });

  it('lets a connection wait as long for its first request: Go keeps connections it dialled but never used as idle ones', () => {
    // Under a burst, Go's http.Transport dials one connection per waiting request; a request that
    // gets a freed connection first leaves the new one in the idle pool, unused, for up to 90 s.
    expect(DEFAULT_CONNECTION_LIMITS.firstRequestTimeoutMs).to.be.above(90_000);
  });

  it("lets the webhook take as many connections as one apiserver's default in-flight limits, with room for Go's extra dials", () => {
    // --max-requests-inflight 400 + --max-mutating-requests-inflight 200: every one can be a webhook call.
    expect(WEBHOOK_CONNECTION_LIMITS.maxConnections).to.be.above(600);
  });
});
