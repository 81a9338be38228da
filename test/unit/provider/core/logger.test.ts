import { ApiException } from '@kubernetes/client-node';
import { expect } from 'chai';
import { errorFields, silentLogger } from '../../../../provider/core/logger.js';

describe('errorFields', () => {
  const cases: [string, unknown, string][] = [
    ['an Error: its message', new Error('boom'), 'boom'],
    ['only the first line of a message', new Error('first line\nsecond line'), 'first line'],
    ['the cause chain, outermost first', new Error('reconcile', { cause: new Error('write', { cause: new Error('ECONNRESET') }) }), 'reconcile: write: ECONNRESET'],
    ['a string thrown', 'plain', 'plain'],
    ['an ApiException: the Status message, not the body and headers', new ApiException(404, 'HTTP-Code: 404\nMessage: ...\nBody: {...}\nHeaders: {...}', '{"kind":"Status","message":"pods \\"p\\" not found"}', { 'set-cookie': 'secret' }), 'HTTP 404: pods "p" not found'],
    ['an ApiException whose body is an object', new ApiException(409, 'conflict', { kind: 'Status', message: 'the object has been modified' }, {}), 'HTTP 409: the object has been modified'],
    ['an ApiException whose body is no Status', new ApiException(502, 'bad gateway', '<html>bad gateway</html>', {}), 'HTTP 502'],
    ['an ApiException as a cause', new Error('create delegate', { cause: new ApiException(403, 'x', '{"message":"forbidden"}', {}) }), 'create delegate: HTTP 403: forbidden'],
  ];
  for (const [what, err, want] of cases) {
    it(what, () => expect(errorFields(err)).to.deep.equal({ error: want }));
  }

  it('stops after five causes, so a cycle cannot loop', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    (a as Error & { cause?: unknown }).cause = b;
    expect(errorFields(a).error.split(': ')).to.deep.equal(['a', 'b', 'a', 'b', 'a']);
  });
});

describe('silentLogger', () => {
  it('accepts every level and structured fields without writing', () => {
    const logger = silentLogger();
    expect(logger.silent).to.equal(true);
    for (const level of ['error', 'warn', 'info', 'debug']) logger.log(level, 'message', { cluster: 'c1' });
  });
});
