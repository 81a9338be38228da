import { expect } from 'chai';
import { createServer, type Server, type Socket } from 'node:net';
import { CoreV1Api } from '@kubernetes/client-node';
import { embeddedIPv4, ServerAddressPolicy, ServerAddressRefusedError } from '../../../../provider/clusters/server-address-policy.js';
import { buildTargetKubeConfig } from '../../../../provider/clusters/target-kubeconfig.js';

describe('ServerAddressPolicy', () => {
  const strict = new ServerAddressPolicy({ allowLoopback: false, ownAddresses: ['10.244.0.7', 'fd12::7'] });
  const table: [string, string | undefined][] = [
    ['169.254.169.254', 'link-local'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['64:ff9b::a9fe:a9fe', 'link-local'],
    ['fe80::abcd', 'link-local'],
    ['fd00:ec2::254', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['239.1.2.3', 'multicast'],
    ['ff02::1', 'multicast'],
    ['127.0.0.1', 'loopback'],
    ['127.8.9.10', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['10.244.0.7', 'own addresses'],
    ['fd12::7', 'own addresses'],
    ['10.0.0.1', undefined],
    ['192.168.1.10', undefined],
    ['172.20.0.1', undefined],
    ['100.64.0.1', undefined],
    ['2001:db8::1', undefined],
    // IPv6 forms that carry an IPv4 address, judged by it too.
    ['::7f00:1', 'loopback'],
    ['::127.0.0.1', 'loopback'],
    ['64:ff9b::127.0.0.1', 'loopback'],
    ['64:ff9b:1::7f00:1', 'loopback'],
    ['2002:7f00:1::', 'loopback'],
    ['2002:a9fe:a9fe::1', 'link-local'],
    ['::af4:7', 'own addresses'],
    ['64:ff9b::a00:1', undefined],
    ['2002:a00:1::1', undefined],
  ];
  for (const [address, why] of table) {
    it(`${why ? 'refuses' : 'allows'} ${address}${why ? ` (${why})` : ''}`, () => {
      const got = strict.refusal(address);
      if (why) expect(got).to.contain(why);
      else expect(got).to.equal(undefined);
    });
  }

  it('allows loopback only when told to', () => {
    const local = new ServerAddressPolicy({ allowLoopback: true, ownAddresses: [] });
    expect(local.refusal('127.0.0.1')).to.equal(undefined);
    expect(local.refusal('::1')).to.equal(undefined);
    expect(local.refusal('169.254.169.254')).to.contain('link-local');
  });

  it('finds the IPv4 address inside IPv4-compatible, NAT64 and 6to4 addresses only', () => {
    expect(embeddedIPv4('::7f00:1')).to.equal('127.0.0.1');
    expect(embeddedIPv4('::1.2.3.4')).to.equal('1.2.3.4');
    expect(embeddedIPv4('64:ff9b::a9fe:a9fe')).to.equal('169.254.169.254');
    expect(embeddedIPv4('64:ff9b:1:0:0:0:a00:1')).to.equal('10.0.0.1');
    expect(embeddedIPv4('2002:c0a8:10a:5::9%eth0')).to.equal('192.168.1.10');
    expect(embeddedIPv4('::')).to.equal(undefined);
    expect(embeddedIPv4('::1')).to.equal(undefined);
    expect(embeddedIPv4('::ffff:127.0.0.1')).to.equal(undefined);
    expect(embeddedIPv4('2001:db8::7f00:1')).to.equal(undefined);
    expect(embeddedIPv4('fe80::1:7f00:1')).to.equal(undefined);
  });

  it('leaves names to the connect-time lookup', () => {
    expect(strict.refusal('localhost')).to.equal(undefined);
  });
});

describe('a Target KubeConfig resolves names through the policy on every connection', () => {
  let server: Server;
  let port: number;
  let connections: number;
  const sockets = new Set<Socket>();
  before(async () => {
    server = createServer((s) => {
      connections++;
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.destroy();
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
    port = (server.address() as { port: number }).port;
  });
  beforeEach(() => {
    connections = 0;
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((res) => server.close(res));
  });

  /** A target at https://localhost:<port>: a name, so only the connect-time lookup can judge it. */
  function kubeConfigFor(policy: ServerAddressPolicy) {
    return buildTargetKubeConfig({ contextName: 'x', cluster: { name: 'c', server: `https://localhost:${port}`, skipTLSVerify: false }, user: { name: 'u', token: 'abc' } }, policy);
  }

  function causes(err: unknown): unknown[] {
    const out: unknown[] = [];
    for (let e = err, i = 0; e && i < 8; i++, e = (e as { cause?: unknown }).cause) out.push(e);
    return out;
  }

  it('refuses a name that resolves to loopback before any byte leaves (API client path)', async () => {
    const kc = kubeConfigFor(new ServerAddressPolicy({ allowLoopback: false, ownAddresses: [] }));
    const err = await kc
      .makeApiClient(CoreV1Api)
      .listNamespace()
      .then(
        () => expect.fail('the request went through'),
        (e: unknown) => e,
      );
    expect(String((err as Error).message)).to.match(/server localhost resolves to (127\.0\.0\.1|::1), which is not allowed: it is loopback/);
    expect(connections).to.equal(0);
  });

  it('refuses it on the applyToHTTPSOptions path too (exec, logs, port-forward)', async () => {
    const kc = kubeConfigFor(new ServerAddressPolicy({ allowLoopback: false, ownAddresses: [] }));
    const opts: import('node:https').RequestOptions = {};
    await kc.applyToHTTPSOptions(opts);
    const https = await import('node:https');
    const err = await new Promise<unknown>((resolve) => {
      const req = https.request(`https://localhost:${port}/api`, opts, () => resolve(undefined));
      req.on('error', resolve);
      req.end();
    });
    expect(causes(err).some((e) => e instanceof ServerAddressRefusedError)).to.equal(true);
    expect(connections).to.equal(0);
  });

  it('connects when the policy allows the address (the hook is really on the path)', async () => {
    const kc = kubeConfigFor(new ServerAddressPolicy({ allowLoopback: true, ownAddresses: [] }));
    await kc
      .makeApiClient(CoreV1Api)
      .listNamespace()
      .catch(() => undefined);
    expect(connections).to.be.greaterThan(0);
  });
});
