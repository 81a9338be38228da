import { X509Certificate, createPrivateKey } from 'node:crypto';
import { expect } from 'chai';
import forge from 'node-forge';
import { createCA } from '../../../certs/create-ca.js';
import { createServingCert } from '../../../certs/create-serving-cert.js';
import { createSelfSignedServingCert } from '../../../certs/create-self-signed-serving-cert.js';
import { createCsr } from '../../../certs/create-csr.js';
import { readCertificate } from '../../../certs/read-certificate.js';
import { verifySignedBy } from '../../../certs/verify-signed-by.js';
import type { CertKeyPair } from '../../../certs/cert-types.js';

const DAY_MS = 24 * 60 * 60 * 1000;
const NOW = Date.UTC(2030, 0, 15, 12, 0, 0);

describe('certs: CA, serving certificates, CSR', () => {
  let ca: CertKeyPair;
  let otherCa: CertKeyPair;

  before(() => {
    ca = createCA({ commonName: 'admiralty-webhook-ca', validityDays: 100, now: NOW });
    otherCa = createCA({ commonName: 'admiralty-webhook-ca', now: NOW });
  });

  it('creates a CA with CA constraints, a positive serial and the requested validity', () => {
    const x = new X509Certificate(ca.certPem);
    expect(x.ca).to.equal(true);
    const info = readCertificate(ca.certPem);
    expect(info.subjectCommonName).to.equal('admiralty-webhook-ca');
    expect(info.issuerCommonName).to.equal('admiralty-webhook-ca');
    expect(info.notAfter.getTime()).to.equal(NOW + 100 * DAY_MS);
    expect(info.notBefore.getTime()).to.be.lessThan(NOW);
    expect(info.serialHex).to.match(/^[0-7][0-9a-f]{31}$/);
    expect(info.serialHex).to.not.match(/^00/);
    expect(verifySignedBy(ca.certPem, ca.certPem)).to.equal(true);
    const forgeCert = forge.pki.certificateFromPem(ca.certPem);
    expect(forgeCert.getExtension('keyUsage')).to.include({ keyCertSign: true });
    // The key matches the certificate.
    expect(x.checkPrivateKey(createPrivateKey(ca.keyPem))).to.equal(true);
  });

  it('gives every CA a different serial', () => {
    expect(readCertificate(ca.certPem).serialHex).to.not.equal(readCertificate(otherCa.certPem).serialHex);
  });

  it('creates a serving certificate signed by the CA with DNS and IP SANs and serverAuth', () => {
    const pair = createServingCert({
      ca,
      commonName: 'admiralty.admiralty.svc',
      dnsNames: ['admiralty.admiralty.svc', 'admiralty.admiralty.svc.cluster.local'],
      ipAddresses: ['127.0.0.1', '::1'],
      validityDays: 30,
      now: NOW,
    });
    const info = readCertificate(pair.certPem);
    expect(info.dnsNames).to.deep.equal(['admiralty.admiralty.svc', 'admiralty.admiralty.svc.cluster.local']);
    expect(info.ipAddresses).to.deep.equal(['127.0.0.1', '::1']);
    expect(info.issuerCommonName).to.equal('admiralty-webhook-ca');
    expect(info.notAfter.getTime()).to.equal(NOW + 30 * DAY_MS);
    expect(verifySignedBy(pair.certPem, ca.certPem)).to.equal(true);
    // Same subject name, different key: the signature check must tell them apart.
    expect(verifySignedBy(pair.certPem, otherCa.certPem)).to.equal(false);
    const x = new X509Certificate(pair.certPem);
    expect(x.ca).to.equal(false);
    expect(x.keyUsage).to.include('1.3.6.1.5.5.7.3.1');
    expect(x.checkHost('admiralty.admiralty.svc')).to.equal('admiralty.admiralty.svc');
    expect(x.checkIP('127.0.0.1')).to.equal('127.0.0.1');
    expect(x.checkHost('evil.example')).to.equal(undefined);
    expect(x.checkPrivateKey(createPrivateKey(pair.keyPem))).to.equal(true);
  });

  it('refuses a serving certificate without SANs or with a bad IP', () => {
    expect(() => createServingCert({ ca, commonName: 'x', dnsNames: [] })).to.throw(TypeError, /at least one/);
    expect(() => createServingCert({ ca, commonName: 'x', dnsNames: ['a'], ipAddresses: ['300.1.1.1'] })).to.throw(TypeError, /not an IP/);
  });

  it('creates a self-signed serving certificate', () => {
    const pair = createSelfSignedServingCert({ commonName: 'system:node:admiralty', dnsNames: [], ipAddresses: ['10.0.0.7'], now: NOW });
    const info = readCertificate(pair.certPem);
    expect(info.issuerCommonName).to.equal('system:node:admiralty');
    expect(info.ipAddresses).to.deep.equal(['10.0.0.7']);
    expect(info.notAfter.getTime()).to.equal(NOW + 365 * DAY_MS);
    expect(verifySignedBy(pair.certPem, pair.certPem)).to.equal(true);
    expect(verifySignedBy(pair.certPem, ca.certPem)).to.equal(false);
  });

  it('creates a kubelet-serving CSR with CN, O and SANs, signed by its key', () => {
    const { csrPem, keyPem } = createCsr({
      commonName: 'system:node:admiralty-cluster-a',
      organization: 'system:nodes',
      dnsNames: ['vk.example'],
      ipAddresses: ['192.0.2.10'],
    });
    expect(csrPem).to.match(/^-----BEGIN CERTIFICATE REQUEST-----/);
    const csr = forge.pki.certificationRequestFromPem(csrPem);
    expect(csr.verify()).to.equal(true);
    expect(csr.subject.getField('CN').value).to.equal('system:node:admiralty-cluster-a');
    expect(csr.subject.getField('O').value).to.equal('system:nodes');
    const ext = (csr.getAttribute({ name: 'extensionRequest' }) as unknown as { extensions: Array<{ name: string; altNames: Array<{ type: number; value?: string; ip?: string }> }> }).extensions;
    const san = ext.find((e) => e.name === 'subjectAltName');
    // forge leaves IP SANs of a parsed CSR as raw bytes: decode them.
    const bytesToIP = (forge.util as unknown as { bytesToIP(b: string): string }).bytesToIP;
    expect(san?.altNames.map((n) => [n.type, n.type === 7 ? bytesToIP(n.value ?? '') : n.value])).to.deep.equal([
      [2, 'vk.example'],
      [7, '192.0.2.10'],
    ]);
    const key = forge.pki.privateKeyFromPem(keyPem) as forge.pki.rsa.PrivateKey;
    expect((csr.publicKey as forge.pki.rsa.PublicKey).n.equals(key.n)).to.equal(true);
    expect(() => createCsr({ commonName: 'x', dnsNames: [] })).to.throw(TypeError);
  });

  it('verifySignedBy returns false on garbage', () => {
    expect(verifySignedBy('not a pem', ca.certPem)).to.equal(false);
  });
});
