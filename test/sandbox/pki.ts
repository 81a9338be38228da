import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Certificates for the sandbox's control planes, made once per sandbox with Debian's openssl
 * (fast, and independent of the code under test). One CA signs everything: apiserver serving
 * certificates, client certificates (admin, the apiserver's kubelet client) and, through the
 * controller-manager's CSR signer, the kubelet-serving certificates of kwok and the provider.
 * A second CA, the front proxy's, signs only the apiserver's client certificate towards
 * aggregated APIs (metrics-server), as kubeadm keeps them apart: an extension apiserver trusts
 * the user named in the headers of any client its request-header CA signed.
 */
export interface SandboxPki {
  dir: string;
  caCert: string;
  caKey: string;
  saKey: string;
  saPub: string;
  apiserverCert: string;
  apiserverKey: string;
  adminCert: string;
  adminKey: string;
  kubeletClientCert: string;
  kubeletClientKey: string;
  kwokCert: string;
  kwokKey: string;
  frontProxyCaCert: string;
  frontProxyClientCert: string;
  frontProxyClientKey: string;
  metricsServerCert: string;
  metricsServerKey: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Creates the PKI in `dir` unless it is already there. Idempotent. */
export function ensurePki(dir: string): SandboxPki {
  mkdirSync(dir, { recursive: true });
  const p = (f: string) => join(dir, f);
  const pki: SandboxPki = {
    dir,
    caCert: p('ca.crt'),
    caKey: p('ca.key'),
    saKey: p('sa.key'),
    saPub: p('sa.pub'),
    apiserverCert: p('apiserver.crt'),
    apiserverKey: p('apiserver.key'),
    adminCert: p('admin.crt'),
    adminKey: p('admin.key'),
    kubeletClientCert: p('kubelet-client.crt'),
    kubeletClientKey: p('kubelet-client.key'),
    kwokCert: p('kwok.crt'),
    kwokKey: p('kwok.key'),
    frontProxyCaCert: p('front-proxy-ca.crt'),
    frontProxyClientCert: p('front-proxy-client.crt'),
    frontProxyClientKey: p('front-proxy-client.key'),
    metricsServerCert: p('metrics-server.crt'),
    metricsServerKey: p('metrics-server.key'),
  };
  if (existsSync(p('.complete'))) return pki;

  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '3650', '-subj', '/CN=sandbox-ca', '-keyout', 'ca.key', '-out', 'ca.crt'], dir);
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '3650', '-subj', '/CN=sandbox-front-proxy-ca', '-keyout', 'front-proxy-ca.key', '-out', 'front-proxy-ca.crt'], dir);
  openssl(['genrsa', '-out', 'sa.key', '2048'], dir);
  openssl(['rsa', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir);

  const sign = (name: string, subject: string, ext: string, ca = 'ca') => {
    openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', subject, '-keyout', `${name}.key`, '-out', `${name}.csr`], dir);
    writeFileSync(p(`${name}.ext`), ext);
    openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.crt`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-days', '3650', '-out', `${name}.crt`, '-extfile', `${name}.ext`], dir);
  };
  sign(
    'apiserver',
    '/CN=kube-apiserver',
    'subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1\nextendedKeyUsage=serverAuth\n',
  );
  sign('admin', '/O=system:masters/CN=sandbox-admin', 'extendedKeyUsage=clientAuth\n');
  // The apiserver's identity towards kubelets; the sandbox binds it to system:kubelet-api-admin,
  // as kubeadm does, so a kubelet's SubjectAccessReview for it is allowed.
  sign('kubelet-client', '/CN=kube-apiserver-kubelet-client', 'extendedKeyUsage=clientAuth\n');
  // kwok's kubelet server certificate, so that the apiservers can verify kubelets against the CA.
  sign('kwok', '/O=system:nodes/CN=system:node:kwok', 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  // The apiserver's identity towards aggregated APIs (--proxy-client-cert-file), the one name
  // they accept request headers from (--requestheader-allowed-names).
  sign('front-proxy-client', '/CN=front-proxy-client', 'extendedKeyUsage=clientAuth\n', 'front-proxy-ca');
  // metrics-server's serving certificate: the aggregator verifies it against the APIService's
  // caBundle, for the name of the Service the APIService names.
  sign('metrics-server', '/CN=metrics-server', 'subjectAltName=DNS:metrics-server.kube-system.svc,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  writeFileSync(p('.complete'), '');
  return pki;
}
