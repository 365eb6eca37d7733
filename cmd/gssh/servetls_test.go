package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 and its key into dir:
// their paths.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gssh test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(k)
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, key
}

// TestServeTLS: gssh serve --listen with --tls-cert and --tls-key serves
// HTTPS, which a gssh --server https://... with the certificate trusted
// (SSL_CERT_FILE) and a token uses as the local state; TLS files that
// cannot be read keep gssh serve from starting, naming them.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	bin := buildGssh(t)
	root, _ := filepath.Abs("../..")
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o700)
	inv := filepath.Join(dir, "hosts.yaml")
	os.WriteFile(inv, []byte("hosts:\n  - name: ctl\n    local: true\n"), 0o600)
	env := append(os.Environ(), "HOME="+home, "GSSH_INVENTORY="+inv, "GSSH_STATE="+filepath.Join(dir, "state.db"),
		"PATH="+fakeSMIBin(t, root)+":"+os.Getenv("PATH"), "GSSH_FAKE_SMI_DIR="+filepath.Join(root, "probe", "testdata", "fleet", "a100x4"),
		"GSSH_CLAIMS_DIR="+filepath.Join(dir, "claims"), "GSSH_SERVER=", "GSSH_TOKEN=", testInventoryEnv+"="+filepath.Join(dir, "none.yaml"))
	gssh := func(extra []string, args ...string) (string, string, int) {
		c := exec.Command(filepath.Join(bin, "gssh"), args...)
		c.Env = append(env, extra...)
		var out, errb strings.Builder
		c.Stdout, c.Stderr = &out, &errb
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return out.String(), errb.String(), code
	}

	if _, errs, code := gssh(nil, "serve", "--listen", "127.0.0.1:0", "--tls-cert", filepath.Join(dir, "nope.pem"), "--tls-key", filepath.Join(dir, "nope.key")); code == 0 || !strings.Contains(errs, "nope.pem") {
		t.Errorf("gssh serve with TLS files missing: exit %d: %s; want it refused, naming them", code, errs)
	}

	cert, key := selfSigned(t, dir)
	tok, errs, code := gssh(nil, "token", "create")
	if code != 0 {
		t.Fatalf("token create: exit %d: %s", code, errs)
	}
	url, _ := startServeAPI(t, filepath.Join(bin, "gssh"), env, "--interval", "1h", "--tls-cert", cert, "--tls-key", key)
	remote := []string{"GSSH_SERVER=" + url, "GSSH_TOKEN=" + strings.TrimSpace(tok), "SSL_CERT_FILE=" + cert, "GSSH_INVENTORY=" + filepath.Join(dir, "no-such.yaml")}
	if o, errs, code := gssh(remote, "submit", "--host", "ctl", "--mem", "1G", "--", "echo", "over tls"); code != 0 || !strings.Contains(o, "job 1 running on ctl:") {
		t.Fatalf("submit over HTTPS: exit %d: %s%s", code, o, errs)
	}
	if o, errs, code := gssh(remote, "logs", "-f", "1"); code != 0 || o != "over tls\n" {
		t.Errorf("logs -f over HTTPS: exit %d: %q %s", code, o, errs)
	}
	if _, errs, code := gssh([]string{"GSSH_SERVER=" + url, "GSSH_TOKEN=" + strings.TrimSpace(tok)}, "ps"); code == 0 || !strings.Contains(errs, "certificate") {
		t.Errorf("an untrusted certificate: exit %d: %s; want it refused", code, errs)
	}
	if _, errs, code := gssh([]string{"GSSH_SERVER=" + url, "GSSH_TOKEN=gssh_00000000_nope", "SSL_CERT_FILE=" + cert}, "ps"); code == 0 || !strings.Contains(errs, "refused the token") {
		t.Errorf("a wrong token: exit %d: %s; want it refused", code, errs)
	}
}

// startServeAPI starts gssh serve (bin) with args and --listen on a free
// loopback port, in env, killed at Cleanup; it returns the API's URL
// once gssh serve says it listens, and its output.
func startServeAPI(t *testing.T, bin string, env []string, args ...string) (string, *output) {
	t.Helper()
	srv := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	srv.Env = env
	out := outputFile(t, "serve.out")
	srv.Stdout, srv.Stderr = out.File, out.File
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if m := regexp.MustCompile(`HTTP API on (https?://\S+) `).FindStringSubmatch(out.String()); m != nil {
			return m[1], out
		} else if time.Now().After(end) {
			t.Fatalf("gssh serve did not say where it listens:\n%s", out.String())
		}
	}
}
