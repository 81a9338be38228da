import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { join } from 'node:path';
import { CoreV1Api, type V1Secret } from '@kubernetes/client-node';
import { createCA } from '../../../../certs/create-ca.js';
import { createServingCert } from '../../../../certs/create-serving-cert.js';
import { ServerAddressPolicy } from '../../../../provider/clusters/server-address-policy.js';
import { kubeConfigFromSecret } from '../../../../provider/clusters/target-client.js';
import { KubeconfigError, parseTargetKubeconfig, TARGET_MAX_ANSWER_BYTES, TARGET_MAX_ANSWER_TOKENS } from '../../../../provider/clusters/target-kubeconfig.js';
import { buildKubeconfigSecret } from '../../../../provider/tools/export-kubeconfig.js';

const POLICY = new ServerAddressPolicy({ allowLoopback: false, ownAddresses: ['10.1.2.3'] });
const REF = { secretName: 's', secretNamespace: 'ns' };
const PEM_B64 = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64');

/** A one-context kubeconfig; `user` and `cluster` are YAML flow-mapping bodies. */
function kubeconfig(user = 'token: abc.def', cluster = 'server: https://10.0.0.1:6443'): string {
  return `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {${cluster}}}]\nusers: [{name: u, user: {${user}}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`;
}

function secretOf(text: string): V1Secret {
  return { metadata: { name: REF.secretName, namespace: REF.secretNamespace }, data: { config: Buffer.from(text).toString('base64') } };
}

/** A kubeconfig whose `preferences` mapping has `n` keys, the first of them twice. */
function twiceKeyed(n: number): string {
  return `preferences: {${Array.from({ length: n }, (_, i) => `k${i}: v`).join(', ')}, k0: again}\n${kubeconfig()}`;
}

function refusal(text: string, policy = POLICY): KubeconfigError {
  try {
    kubeConfigFromSecret(secretOf(text), REF, policy);
  } catch (err) {
    expect(err).to.be.instanceOf(KubeconfigError);
    return err as KubeconfigError;
  }
  expect.fail('the kubeconfig was accepted');
}

describe('Target kubeconfigs: the provider never acts on its own machine for a Secret writer', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'target-kubeconfig-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('refuses token-file, and never reads the file: the provider token is not sent anywhere', () => {
    const path = join(dir, 'token');
    writeFileSync(path, 'provider-own-token-canary');
    const err = refusal(kubeconfig(`token-file: ${path}`));
    expect(err.reason).to.equal('KubeconfigUnsupported');
    expect(err.message).to.match(/user "u": field "token-file" reads a file of the provider's machine/);
    expect(err.message).to.not.contain('canary');
    expect(err.message).to.not.contain(path);
  });

  it('answers the same for a token-file that does not exist (no file-existence oracle)', () => {
    const present = join(dir, 'present');
    writeFileSync(present, 't');
    const a = refusal(kubeconfig(`token-file: ${present}`));
    const b = refusal(kubeconfig(`token-file: ${join(dir, 'absent')}`));
    expect(a.reason).to.equal(b.reason);
    expect(a.message).to.equal(b.message);
  });

  const refused: [string, string, string | undefined, RegExp][] = [
    ['an exec plugin', 'exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, id]}', undefined, /field "exec" runs a command/],
    ['an auth-provider', 'auth-provider: {name: oidc, config: {}}', undefined, /field "auth-provider"/],
    ['client certificate files', 'client-certificate: /etc/passwd, client-key: /etc/shadow', undefined, /field "client-certificate" reads a file.*field "client-key" reads a file/],
    ['a CA file', 'token: t', 'server: https://10.0.0.1, certificate-authority: /etc/hostname', /cluster "c": field "certificate-authority" reads a file/],
    ['a proxy-url', 'token: t', 'server: https://10.0.0.1, proxy-url: "http://10.9.9.9:3128"', /field "proxy-url" sends the traffic through a proxy/],
    ['basic authentication', 'username: a, password: b', undefined, /field "username" is basic authentication/],
    ['impersonation', 'token: t, as: system:admin', undefined, /field "as" impersonates/],
    ['an unknown user field', 'token: t, tokenFile: /x', undefined, /field "tokenFile" is not supported/],
    ['an unknown cluster field', 'token: t', 'server: https://10.0.0.1, socks: x', /cluster "c": field "socks" is not supported/],
  ];
  for (const [what, user, cluster, message] of refused) {
    it(`refuses ${what} (KubeconfigUnsupported)`, () => {
      const err = refusal(kubeconfig(user, cluster));
      expect(err.reason).to.equal('KubeconfigUnsupported');
      expect(err.message).to.match(message);
      expect(err.message).to.match(/^Secret ns\/s key "config": /);
    });
  }

  it('refuses a forbidden field in an entry the context does not even use', () => {
    const text = kubeconfig().replace('users: [', 'users: [{name: other, user: {token-file: /var/run/secrets/kubernetes.io/serviceaccount/token}}, ');
    expect(refusal(text).reason).to.equal('KubeconfigUnsupported');
  });

  it('refuses unknown top-level and entry fields', () => {
    expect(refusal(kubeconfig() + 'plugins: {}\n').message).to.match(/kubeconfig: field "plugins" is not supported/);
    expect(refusal(kubeconfig().replace('{name: c, cluster:', '{name: c, secret: 1, cluster:')).message).to.match(/clusters\[0\] \("c"\): field "secret" is not supported/);
  });
});

describe('Target kubeconfigs: tokens and inline data', () => {
  it('refuses a token with a trailing newline, without quoting it (it would become an illegal header echoed in logs)', () => {
    const text = kubeconfig('token: "sekret-value\\n"');
    const err = refusal(text);
    expect(err.reason).to.equal('KubeconfigInvalid');
    expect(err.message).to.match(/token must be at most 16 KiB of visible ASCII/);
    expect(err.message).to.not.contain('sekret');
  });

  it('refuses a token with spaces or control characters', () => {
    expect(refusal(kubeconfig('token: "a b"')).reason).to.equal('KubeconfigInvalid');
    expect(refusal(kubeconfig('token: "a\\u0000b"')).reason).to.equal('KubeconfigInvalid');
  });

  it('refuses CA or client data that is not base64 PEM, and a certificate without its key', () => {
    expect(refusal(kubeconfig('token: t', 'server: https://10.0.0.1, certificate-authority-data: "%%%"')).message).to.match(/certificate-authority-data must be base64-encoded PEM/);
    expect(refusal(kubeconfig('token: t', 'server: https://10.0.0.1, certificate-authority-data: Zm9v')).message).to.match(/must be base64-encoded PEM/);
    expect(refusal(kubeconfig(`client-certificate-data: ${PEM_B64}`)).message).to.match(/client-certificate-data and client-key-data go together/);
  });

  it('refuses a YAML alias bomb by its alias count instead of expanding it', () => {
    // 10^12 items once expanded; the alias cap stops the expansion at its first few. An expansion
    // would not end within the test's timeout.
    const lines = ['a0: &a0 [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i < 12; i++)
      lines.push(
        `a${i}: &a${i} [${Array(10)
          .fill(`*a${i - 1}`)
          .join(', ')}]`,
      );
    const err = refusal(lines.join('\n'));
    expect(err.reason).to.equal('KubeconfigInvalid');
    expect(err.message).to.match(/Excessive alias count/);
  });

  it('refuses a kubeconfig larger than 64 KiB', () => {
    expect(refusal(kubeconfig(`token: ${'a'.repeat(70 * 1024)}`)).message).to.match(/larger than 64 KiB/);
  });

  it('parses a Secret again only when its text changed (it is read on every probe)', () => {
    const first = kubeConfigFromSecret(secretOf(kubeconfig()), REF, POLICY);
    expect(kubeConfigFromSecret(secretOf(kubeconfig()), REF, POLICY, first), 'the same object, not parsed again').to.equal(first);
    const changed = kubeConfigFromSecret(secretOf(kubeconfig('token: other')), REF, POLICY, first);
    expect(changed).to.not.equal(first);
    expect(changed.kubeConfig.getCurrentUser()?.token).to.equal('other');
  });

  it('does not parse a refused text again either, until it changes', () => {
    const deep = secretOf(`${'- '.repeat(3000)}x`);
    let refused: KubeconfigError | undefined;
    try {
      kubeConfigFromSecret(deep, REF, POLICY);
    } catch (err) {
      refused = err as KubeconfigError;
    }
    expect(refused).to.be.instanceOf(KubeconfigError);
    expect(refused!.reason).to.equal('KubeconfigInvalid');
    expect(refused!.message).to.match(/indented deeper than 64 columns/);
    expect(refused!.fingerprint).to.be.a('string');
    expect(() => kubeConfigFromSecret(deep, REF, POLICY, undefined, refused), 'the same refusal, not parsed again')
      .to.throw()
      .that.equals(refused);
    const fixed = kubeConfigFromSecret(secretOf(kubeconfig()), REF, POLICY, undefined, refused);
    expect(fixed.kubeConfig.getCurrentUser()?.token).to.be.a('string');
  });

  it('accepts what `admiralty export-kubeconfig` writes, with CA data and a token', () => {
    const secret = buildKubeconfigSecret({
      secretName: 's',
      secretNamespace: 'ns',
      server: 'https://c2.example:6443',
      caData: PEM_B64,
      token: 'eyJhbGciOi.abc.def',
      namespace: 'default',
      clusterName: 'c2',
    });
    const text = secret.stringData!.config!;
    const { kubeConfig } = kubeConfigFromSecret(secretOf(text), REF, POLICY);
    expect(kubeConfig.getCurrentCluster()).to.deep.include({ server: 'https://c2.example:6443', caData: PEM_B64, skipTLSVerify: false });
    expect(kubeConfig.getCurrentUser()).to.deep.include({ token: 'eyJhbGciOi.abc.def' });
    expect(kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace).to.equal('default');
  });

  it('accepts inert fields kubeconfig writers add (preferences, extensions) and client certificates', () => {
    const text =
      kubeconfig(`client-certificate-data: ${PEM_B64}, client-key-data: ${PEM_B64}`, 'server: https://10.0.0.1, tls-server-name: api.internal, extensions: [{name: x, extension: {}}]') +
      'preferences: {}\n';
    const parsed = parseTargetKubeconfig(text, { policy: POLICY });
    expect(parsed.cluster).to.deep.equal({ name: 'c', server: 'https://10.0.0.1', caData: undefined, tlsServerName: 'api.internal', skipTLSVerify: false });
    expect(parsed.user).to.deep.include({ certData: PEM_B64, keyData: PEM_B64, token: undefined });
  });

  it('hands client-node only the selected context, its cluster and its user', () => {
    const text = kubeconfig().replace('clusters: [', 'clusters: [{name: other, cluster: {server: https://10.0.0.9}}, ');
    const { kubeConfig } = kubeConfigFromSecret(secretOf(text), REF, POLICY);
    expect(kubeConfig.getClusters().map((c) => c.name)).to.deep.equal(['c']);
    expect(kubeConfig.getUsers().map((u) => u.name)).to.deep.equal(['u']);
    expect(kubeConfig.getContexts().map((c) => c.name)).to.deep.equal(['x']);
  });
});

describe('Target kubeconfigs: where the server may be', () => {
  const refused: [string, string, RegExp][] = [
    ['a trailing ? (the API path would become a query)', 'https://10.0.0.1/?', /may not have a query or a fragment/],
    ['a query string', 'https://10.0.0.1/x?a=1', /may not have a query/],
    ['a fragment', 'https://10.0.0.1/#x', /may not have a query or a fragment/],
    ['credentials in the URL', 'https://u:p@10.0.0.1', /may not carry a user name or password/],
    ['plain http', 'http://10.0.0.1', /must be an https URL, not http/],
  ];
  for (const [what, server, message] of refused) {
    it(`refuses ${what}`, () => {
      const err = refusal(kubeconfig('token: t', `server: "${server}"`));
      expect(err.reason).to.equal('KubeconfigInvalid');
      expect(err.message).to.match(message);
    });
  }

  const addresses: [string, string, RegExp][] = [
    ['the metadata service', 'https://169.254.169.254', /link-local/],
    ['the metadata service in decimal', 'https://2852039166', /169\.254\.169\.254.*link-local/],
    ['the metadata service as IPv4-mapped IPv6', 'https://[::ffff:169.254.169.254]', /link-local/],
    ['IPv6 link-local', 'https://[fe80::1]:6443', /link-local/],
    ['the AWS IPv6 metadata address', 'https://[fd00:ec2::254]', /cloud metadata address/],
    ['the Alibaba metadata address', 'https://100.100.100.200', /cloud metadata address/],
    ['the unspecified address', 'https://0.0.0.0:10250', /unspecified/],
    ['loopback, when not allowed', 'https://127.0.0.1:10250', /loopback/],
    ['IPv6 loopback, when not allowed', 'https://[::1]:9443', /loopback/],
    ["the provider's own address", 'https://10.1.2.3:10250', /one of the provider's own addresses/],
  ];
  for (const [what, server, message] of addresses) {
    it(`refuses ${what} (ServerNotAllowed)`, () => {
      const err = refusal(kubeconfig('token: t', `server: "${server}"`));
      expect(err.reason).to.equal('ServerNotAllowed');
      expect(err.message).to.match(message);
    });
  }

  it('accepts loopback when the operator allows it, and still refuses link-local', () => {
    const loopbackOk = new ServerAddressPolicy({ allowLoopback: true, ownAddresses: [] });
    const { kubeConfig } = kubeConfigFromSecret(secretOf(kubeconfig('token: t', 'server: https://127.0.0.1:6443')), REF, loopbackOk);
    expect(kubeConfig.getCurrentCluster()?.server).to.equal('https://127.0.0.1:6443');
    expect(refusal(kubeconfig('token: t', 'server: https://169.254.169.254'), loopbackOk).reason).to.equal('ServerNotAllowed');
  });
});

describe('Target kubeconfigs: the hostile-input table', () => {
  it('refuses every hostile kubeconfig with its reason, and prints what each refusal cost', async () => {
    const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
    const cases: [string, string, string][] = [
      ['token-file: the provider token', kubeconfig('token-file: /var/run/secrets/kubernetes.io/serviceaccount/token'), 'KubeconfigUnsupported'],
      ['exec plugin', kubeconfig('exec: {command: /bin/sh}'), 'KubeconfigUnsupported'],
      ['auth-provider', kubeconfig('auth-provider: {name: gcp}'), 'KubeconfigUnsupported'],
      ['client-certificate file', kubeconfig('client-certificate: /etc/passwd'), 'KubeconfigUnsupported'],
      ['certificate-authority file', kubeconfig('token: t', 'server: https://10.0.0.1, certificate-authority: /etc/hostname'), 'KubeconfigUnsupported'],
      ['proxy-url', kubeconfig('token: t', 'server: https://10.0.0.1, proxy-url: "socks5://10.9.9.9"'), 'KubeconfigUnsupported'],
      ['impersonation', kubeconfig('token: t, as-groups: [system:masters]'), 'KubeconfigUnsupported'],
      ['metadata server', kubeconfig('token: t', 'server: https://169.254.169.254'), 'ServerNotAllowed'],
      ['own address', kubeconfig('token: t', 'server: "https://10.1.2.3:10250"'), 'ServerNotAllowed'],
      ['loopback', kubeconfig('token: t', 'server: "https://[::1]"'), 'ServerNotAllowed'],
      ['query string', kubeconfig('token: t', 'server: "https://10.0.0.1/api?x="'), 'KubeconfigInvalid'],
      ['token with a newline', kubeconfig('token: "a\\nb"'), 'KubeconfigInvalid'],
      ['YAML nested 200 000 deep', `clusters: ${deep(200_000)}`, 'KubeconfigInvalid'],
      ['YAML alias bomb', `a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]`, 'KubeconfigInvalid'],
      ['a 60 KB mapping, one key twice', twiceKeyed(6_000), 'KubeconfigInvalid'],
      ['over 64 KiB', `${kubeconfig()}# ${'x'.repeat(300 * 1024)}\n`, 'KubeconfigInvalid'],
    ];
    const heapBefore = process.memoryUsage().heapUsed;
    let peakHeap = heapBefore;
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    const rows: string[] = [];
    let slowestMs = 0;
    for (const [what, text, reason] of cases) {
      const started = process.hrtime.bigint();
      const err = refusal(text);
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      slowestMs = Math.max(slowestMs, ms);
      peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
      rows.push(`${what.padEnd(34)} ${err.reason.padEnd(22)} ${ms.toFixed(1).padStart(6)} ms`);
      expect(err.reason, what).to.equal(reason);
      // Let the delay monitor sample between cases, as the provider's other work would run.
      await new Promise((r) => setImmediate(r));
    }
    delay.disable();
    const maxDelayMs = delay.max / 1e6;
    console.log(`${rows.map((r) => `      ${r}`).join('\n')}\n      peak heap +${((peakHeap - heapBefore) / 2 ** 20).toFixed(1)} MiB, max event-loop delay ${maxDelayMs.toFixed(1)} ms`);
    console.log(`      slowest refusal ${slowestMs.toFixed(1)} ms`);
    // Each refusal runs on the event loop, all at once, so its work must grow with the input's
    // size and no faster: the yaml library's own duplicate check compares every key with every
    // other (1.5 s for 79 KB). Times are printed, not bounded (a loaded machine stretches them
    // all). What is asserted is which check refused the 6000-key mapping: ours, a Set per
    // mapping, whose message this is; the library's, had it run, would have refused it first
    // with "Map keys must be unique".
    expect(refusal(twiceKeyed(6_000)).message).to.match(/not valid YAML: duplicate key "k0"$/);
  });
});

describe("Target kubeconfigs: the bounds on the target apiserver's answers", () => {
  const ca = createCA({ commonName: 'test-ca' });
  const serving = createServingCert({ ca, commonName: 'localhost', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
  let server: http2.Http2SecureServer;
  let body = '';
  const sockets = new Set<Socket>();
  before(async () => {
    server = http2.createSecureServer({ cert: serving.certPem, key: serving.keyPem }, (_req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end(body));
    server.on('secureConnection', (s: Socket) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
  });

  /** listNamespace on a Target KubeConfig built from a Secret, as the registry builds it. */
  function listNamespace() {
    const text = kubeconfig('token: t', `server: https://127.0.0.1:${(server.address() as AddressInfo).port}, certificate-authority-data: ${Buffer.from(ca.certPem).toString('base64')}`);
    const { kubeConfig } = kubeConfigFromSecret(secretOf(text), REF, new ServerAddressPolicy({ allowLoopback: true, ownAddresses: [] }));
    return kubeConfig.makeApiClient(CoreV1Api).listNamespace();
  }

  const list = (pad: string) => `{"kind":"NamespaceList","apiVersion":"v1","metadata":{},"items":[],"pad":${pad}}`;

  async function refusal(): Promise<Error & { type?: string }> {
    try {
      await listNamespace();
    } catch (err) {
      return err as Error;
    }
    expect.fail('the answer was taken');
  }

  it('fails an answer over 16 MiB as too large, and takes one under it', async () => {
    expect(TARGET_MAX_ANSWER_BYTES).to.equal(16 * 2 ** 20);
    body = list(`"${'x'.repeat(17 * 2 ** 20)}"`);
    const err = await refusal();
    expect(err.message).to.match(/^answer of \/api\/v1\/namespaces larger than 16777216 bytes$/);
    expect(err.type).to.equal('max-size');
    body = list(`"${'x'.repeat(15 * 2 ** 20)}"`);
    expect((await listNamespace()).kind).to.equal('NamespaceList');
  });

  it('fails an answer of more than 2 Mi JSON tokens as too large, well under 16 MiB', async () => {
    expect(TARGET_MAX_ANSWER_TOKENS).to.equal(2 * 2 ** 20);
    // 4 MiB of `[],`: 2.8 M arrays, about 60 MiB of heap once parsed.
    body = list(`[${'[],'.repeat(1_400_000)}[]]`);
    const err = await refusal();
    expect(err.message).to.match(/^answer of \/api\/v1\/namespaces has more than 2097152 arrays, objects and items/);
    expect(err.type).to.equal('max-size');
  });
});
