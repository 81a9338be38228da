import { ApiException } from '@kubernetes/client-node';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { createLogger, errorFields, silentLogger } from '../../../../provider/core/logger.js';

describe('errorFields', () => {
  const cases: [string, unknown, string][] = [
    ['an Error: its message', new Error('boom'), 'boom'],
    ['only the first line of a message', new Error('first line\nsecond line'), 'first line'],
    ['the cause chain, outermost first', new Error('reconcile', { cause: new Error('write', { cause: new Error('ECONNRESET') }) }), 'reconcile: write: ECONNRESET'],
    ['a string thrown', 'plain', 'plain'],
    [
      'an ApiException: the Status message, not the body and headers',
      new ApiException(404, 'HTTP-Code: 404\nMessage: ...\nBody: {...}\nHeaders: {...}', '{"kind":"Status","message":"pods \\"p\\" not found"}', { 'set-cookie': 'secret' }),
      'HTTP 404: pods "p" not found',
    ],
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

describe('createLogger levels', () => {
  function capture(level: string) {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    return { logger: createLogger({ level, stream }), lines };
  }

  it('does not even read the fields of a line below its level', () => {
    const { logger, lines } = capture('info');
    let reads = 0;
    const fields = {
      get pod() {
        reads++;
        return 'ns/p';
      },
    };
    logger.debug('scheduler extender: bound', fields);
    logger.child({ controller: 'x' }).debug('from a child', fields);
    expect(reads).to.equal(0);
    logger.info('placed', fields);
    expect(reads, 'an enabled level reads them').to.be.greaterThan(0);
    expect(lines.map((l) => JSON.parse(l).message)).to.deep.equal(['placed']);
  });

  it('writes debug lines once the level is lowered, from the logger and its children', async () => {
    const { logger, lines } = capture('info');
    const child = logger.child({ controller: 'x' });
    logger.level = 'debug';
    logger.debug('a', { k: 1 });
    child.debug('b');
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => JSON.parse(l))).to.deep.include.members([{ level: 'debug', message: 'a', k: 1, timestamp: JSON.parse(lines[0]!).timestamp }]);
    expect(lines.map((l) => JSON.parse(l).message)).to.deep.equal(['a', 'b']);
  });
});

describe('createLogger redacts credentials, whoever logs them', () => {
  /** A logger writing JSON lines into `lines`. */
  function capture(format: 'json' | 'text' = 'json') {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    return { logger: createLogger({ format, level: 'debug', stream }), lines };
  }

  it('keeps a token out of the log when node-fetch echoes an illegal Authorization header in its error', async () => {
    // What client-node's fetch does with a token that ends in a newline: the error text is the header.
    const { Headers } = await import('node-fetch');
    let err: unknown;
    try {
      new Headers().set('Authorization', 'Bearer eyJhbGciOiJSUzI1NiJ9.secret-part\n');
    } catch (e) {
      err = new Error('probing target default/c2', { cause: e });
    }
    expect(errorFields(err).error, 'the raw error text carries the token').to.contain('secret-part');
    const { logger, lines } = capture();
    logger.warn('target probe failed', { target: 'default/c2', ...errorFields(err) });
    await new Promise((r) => setImmediate(r));
    expect(lines).to.have.length(1);
    expect(lines[0]).to.not.contain('secret-part');
    expect(JSON.parse(lines[0]!).error).to.equal('probing target default/c2: Bearer <redacted>');
  });

  it('redacts the message, nested fields and both formats, and leaves the caller objects alone', async () => {
    for (const format of ['json', 'text'] as const) {
      const { logger, lines } = capture(format);
      const request = { headers: { authorization: 'Basic dXNlcjpwYXNz' } };
      logger.info('sent Authorization: Bearer abc.def', { request, list: ['Bearer zzz'] });
      await new Promise((r) => setImmediate(r));
      expect(lines.join('')).to.not.match(/abc\.def|dXNlcjpwYXNz|zzz/);
      expect(lines.join('')).to.contain('Bearer <redacted>');
      expect(request.headers.authorization, 'the caller object is not changed').to.equal('Basic dXNlcjpwYXNz');
    }
  });
});
