import { generateKeyPairSync } from 'node:crypto';
import forge from 'node-forge';

export interface Pem {
  certPem: string;
  keyPem: string;
}

function keyPair(): { privateKey: forge.pki.rsa.PrivateKey; publicKey: forge.pki.rsa.PublicKey; keyPem: string } {
  // Node's keygen is fast; forge's pure-JS keygen would slow the suite down.
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyPem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const fk = forge.pki.privateKeyFromPem(keyPem) as forge.pki.rsa.PrivateKey;
  return { privateKey: fk, publicKey: forge.pki.setRsaPublicKey(fk.n, fk.e), keyPem };
}

let serial = 1;

function makeCert(
  subject: forge.pki.CertificateField[],
  issuer: { cert?: forge.pki.Certificate; key?: forge.pki.rsa.PrivateKey },
  extensions: object[],
): Pem & { cert: forge.pki.Certificate; key: forge.pki.rsa.PrivateKey } {
  const kp = keyPair();
  const cert = forge.pki.createCertificate();
  cert.publicKey = kp.publicKey;
  cert.serialNumber = String(++serial).padStart(2, '0');
  cert.validity.notBefore = new Date(Date.now() - 60_000);
  cert.validity.notAfter = new Date(Date.now() + 3600_000);
  cert.setSubject(subject);
  cert.setIssuer(issuer.cert ? issuer.cert.subject.attributes : subject);
  cert.setExtensions(extensions);
  cert.sign(issuer.key ?? kp.privateKey, forge.md.sha256.create());
  return { cert, key: kp.privateKey, certPem: forge.pki.certificateToPem(cert), keyPem: kp.keyPem };
}

/** A CA, a serving cert for 127.0.0.1 and a client cert (CN/O) signed by the CA. */
export function makeTlsFixtures() {
  const ca = makeCert([{ name: 'commonName', value: 'test-ca' }], {}, [
    { name: 'basicConstraints', cA: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true },
  ]);
  const server = makeCert([{ name: 'commonName', value: 'system:node:admiralty' }], { cert: ca.cert, key: ca.key }, [
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
    { name: 'extKeyUsage', serverAuth: true },
    { name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] },
  ]);
  const client = (cn: string, orgs: string[], signer: { cert?: forge.pki.Certificate; key?: forge.pki.rsa.PrivateKey } = { cert: ca.cert, key: ca.key }) =>
    makeCert([{ name: 'commonName', value: cn }, ...orgs.map((o) => ({ name: 'organizationName', value: o }))], signer, [
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', clientAuth: true },
    ]);
  return { ca, server, client };
}
