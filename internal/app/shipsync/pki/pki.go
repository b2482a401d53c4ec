package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// File names inside the PKI directory.
const (
	CACertFile     = "ca.crt"
	CAKeyFile      = "ca.key"
	ServerCertFile = "server.crt"
	ServerKeyFile  = "server.key"
)

// Validity defaults.
const (
	// CAValidityDefault is how long the development CA is valid (10 years).
	CAValidityDefault = 10 * 365 * 24 * time.Hour
	// CertValidityDefault is how long a server or node certificate is valid
	// (1 year).
	CertValidityDefault = 365 * 24 * time.Hour
	// backdate lets a certificate be valid on a peer whose clock is a little
	// behind.
	backdate = 5 * time.Minute
)

// NodeURIPrefix prefixes the node id in a node certificate's URI SAN.
const NodeURIPrefix = "urn:shipsync:node:"

// ErrExists is returned, wrapped, when a file to be written already exists:
// the PKI never overwrites a key or a certificate.
var ErrExists = errors.New("pki: file exists")

// nodeIDRE is what a node id may be: it becomes a file name, a CN and a URI.
var nodeIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidNodeID reports an error when id is not 1–64 characters of letters,
// digits, '.', '_' and '-' starting with a letter or digit.
func ValidNodeID(id string) error {
	if !nodeIDRE.MatchString(id) {
		return fmt.Errorf("pki: node id %q: want 1–64 characters [A-Za-z0-9._-], starting with a letter or digit", id)
	}
	return nil
}

// Dir is a PKI directory. Its methods are not safe for concurrent use on the
// same directory.
type Dir struct {
	// Path is the directory.
	Path string
	// Clock stamps not_before. Required.
	Clock relaytype.Clock
	// Validity of issued server and node certificates; default
	// CertValidityDefault.
	Validity time.Duration
}

// InitCA creates the directory (mode 0700) if needed and a new CA in it
// (ca.crt, ca.key). It refuses (ErrExists) when either file exists.
func (d Dir) InitCA() (*x509.Certificate, error) {
	if err := os.MkdirAll(d.Path, 0o700); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	if err := os.Chmod(d.Path, 0o700); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	if err := d.refuseExisting(CACertFile, CAKeyFile); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: ca key: %w", err)
	}
	now := d.Clock.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "shipsync development CA", Organization: []string{"relay shipsync"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CAValidityDefault),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("pki: ca certificate: %w", err)
	}
	if err := d.writePair(CACertFile, CAKeyFile, der, key); err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// IssueServer writes server.crt and server.key, signed by the CA, for the
// given host names and IP addresses (default localhost and 127.0.0.1). It
// refuses (ErrExists) when either file exists.
func (d Dir) IssueServer(hosts []string) (*x509.Certificate, error) {
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1"}
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0], Organization: []string{"relay shipsync"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return d.issue(tmpl, ServerCertFile, ServerKeyFile)
}

// NodeFiles returns the certificate and key file names of a node
// certificate named name (default "node-<id>").
func NodeFiles(name string) (cert, key string) { return name + ".crt", name + ".key" }

// IssueNode writes <name>.crt and <name>.key (name defaults to
// "node-<nodeID>"), a client certificate whose identity is nodeID: the CN
// and the URI SAN urn:shipsync:node:<nodeID>. A rotation issues a second
// certificate for the same node under another name. It refuses (ErrExists)
// when either file exists.
func (d Dir) IssueNode(nodeID, name string) (*x509.Certificate, error) {
	if err := ValidNodeID(nodeID); err != nil {
		return nil, err
	}
	if name == "" {
		name = "node-" + nodeID
	}
	if filepath.Base(name) != name || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("pki: certificate name %q: want a plain file name", name)
	}
	u, err := url.Parse(NodeURIPrefix + nodeID)
	if err != nil {
		return nil, fmt.Errorf("pki: node uri: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: nodeID, Organization: []string{"relay shipsync node"}},
		URIs:        []*url.URL{u},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	cf, kf := NodeFiles(name)
	return d.issue(tmpl, cf, kf)
}

// issue signs tmpl with the directory's CA and writes it as certFile and
// keyFile.
func (d Dir) issue(tmpl *x509.Certificate, certFile, keyFile string) (*x509.Certificate, error) {
	if err := d.refuseExisting(certFile, keyFile); err != nil {
		return nil, err
	}
	ca, err := tls.LoadX509KeyPair(filepath.Join(d.Path, CACertFile), filepath.Join(d.Path, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("pki: load CA (run init first): %w", err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("pki: parse CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: key: %w", err)
	}
	now := d.Clock.Now()
	validity := d.Validity
	if validity <= 0 {
		validity = CertValidityDefault
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(validity)
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("pki: sign %s: %w", certFile, err)
	}
	if err := d.writePair(certFile, keyFile, der, key); err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func (d Dir) refuseExisting(files ...string) error {
	for _, f := range files {
		if _, err := os.Lstat(filepath.Join(d.Path, f)); err == nil {
			return fmt.Errorf("%w: %s (the PKI never overwrites; choose another name or directory)", ErrExists,
				filepath.Join(d.Path, f))
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("pki: %w", err)
		}
	}
	return nil
}

// writePair writes the key first (0600) and the certificate (0644), each
// with O_EXCL so that a file appearing meanwhile is not overwritten.
func (d Dir) writePair(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("pki: marshal key: %w", err)
	}
	if err := writeExcl(filepath.Join(d.Path, keyFile), 0o600,
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})); err != nil {
		return err
	}
	return writeExcl(filepath.Join(d.Path, certFile), 0o644,
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func writeExcl(path string, mode os.FileMode, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w: %s", ErrExists, path)
	}
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	_, werr := f.Write(data)
	return errors.Join(werr, f.Close(), os.Chmod(path, mode)) // Chmod: the umask may have narrowed it
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("pki: crypto/rand failed: %v", err)) // crypto/rand never fails on supported platforms
	}
	return n
}

// Fingerprint is the hex SHA-256 of a certificate's DER bytes: how the node
// registry names a certificate.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return hex.EncodeToString(sum[:])
}

// NodeID returns the node id a verified client certificate names: its URI
// SAN urn:shipsync:node:<id>, which must agree with the CN. A certificate
// without exactly one such URI, or whose CN differs, names no node.
func NodeID(cert *x509.Certificate) (string, error) {
	var ids []string
	for _, u := range cert.URIs {
		if s := u.String(); strings.HasPrefix(s, NodeURIPrefix) {
			ids = append(ids, strings.TrimPrefix(s, NodeURIPrefix))
		}
	}
	if len(ids) != 1 {
		return "", fmt.Errorf("pki: certificate has %d %s URIs, want 1", len(ids), NodeURIPrefix)
	}
	if err := ValidNodeID(ids[0]); err != nil {
		return "", err
	}
	if cert.Subject.CommonName != ids[0] {
		return "", errors.New("pki: certificate CN differs from its node URI")
	}
	return ids[0], nil
}

// ReadCert reads the first PEM certificate of path.
func ReadCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("pki: %s: no PEM certificate", path)
		}
		if blk.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("pki: %s: %w", path, err)
			}
			return c, nil
		}
	}
}

// CAPool reads the directory's CA certificate as a pool.
func (d Dir) CAPool() (*x509.CertPool, error) {
	data, err := os.ReadFile(filepath.Join(d.Path, CACertFile))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("pki: " + CACertFile + ": no PEM certificate")
	}
	return pool, nil
}

// ClientTLS returns the TLS client config of the node certificate named
// name (NodeFiles): its certificate and the directory's CA as the roots
// the shore's certificate is checked against.
func (d Dir) ClientTLS(name string) (*tls.Config, error) {
	cf, kf := NodeFiles(name)
	kp, err := tls.LoadX509KeyPair(filepath.Join(d.Path, cf), filepath.Join(d.Path, kf))
	if err != nil {
		return nil, err
	}
	roots, err := d.CAPool()
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}, nil
}

// ServerCert reads the shore's certificate and key (IssueServer).
func (d Dir) ServerCert() (tls.Certificate, error) {
	return tls.LoadX509KeyPair(filepath.Join(d.Path, ServerCertFile), filepath.Join(d.Path, ServerKeyFile))
}
