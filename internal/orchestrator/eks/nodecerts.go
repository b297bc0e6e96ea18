package eks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"

	"github.com/haleproject/hale/internal/nodestack"
	"github.com/haleproject/hale/internal/store"
)

// A real kubelet on a registered cluster (one hale does not run, whose CA it does not hold)
// gets its certificates from the cluster's own signers, as a kubelet's TLS bootstrap gets them,
// but without a bootstrap token on the node: hale makes the node's key, asks for a certificate
// with a CertificateSigningRequest, approves the request it made itself (its ClusterRole may
// approve for the two node signers only, which sign nothing but system:node:<name> of group
// system:nodes), and writes key and certificate onto the node. The cluster's controller
// manager signs them (its csrsigning controller, --cluster-signing-cert-file, as kubeadm and
// EKS run it). kube-proxy authenticates with a ServiceAccount token made at the registration.

// certWait is how long the cluster's signer has to issue a certificate hale approved.
const certWait = 30 * time.Second

// registeredCredentials are the credentials of node's kubelet and kube-proxy on the registered
// cluster k, reached through cs, hale's client of it; registry is hale's OCI registry, which
// the node pulls RegistryName's images from.
func registeredCredentials(ctx context.Context, cs kubernetes.Interface, k *store.KubeCluster, node nodestack.Node, hostname, registry string) (*nodestack.Credentials, error) {
	if k.NodeJoin == nil {
		return nil, fmt.Errorf("the Kubernetes cluster %s was registered before hale joined real kubelets to registered clusters: register it again (hale kube register --name %s --kubeconfig FILE)", k.Name, k.Name)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(k.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("the registration of %s: %w", k.Name, err)
	}
	ip := net.ParseIP(node.IP)
	if ip == nil {
		return nil, fmt.Errorf("node %s: address %q", node.Name, node.IP)
	}
	c := &nodestack.Credentials{Server: rc.Host, CA: rc.TLSClientConfig.CAData, ProxyToken: k.NodeJoin.ProxyToken,
		ClusterCIDR: k.NodeJoin.PodCIDR, ClusterDNS: k.NodeJoin.ClusterDNS, Registry: registry}
	if c.ClusterDNS == "" {
		c.ClusterDNS = "-" // the cluster runs no kube-dns: pods get no cluster nameserver
	}
	if len(c.CA) == 0 {
		return nil, fmt.Errorf("the registration of %s has no CA certificate for its API server", k.Name)
	}
	user := "system:node:" + node.Name
	subject := &pkix.Name{CommonName: user, Organization: []string{"system:nodes"}}
	c.ClientCert, c.ClientKey, err = nodeCertificate(ctx, cs, subject, nil, nil, certv1.KubeAPIServerClientKubeletSignerName,
		[]certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth})
	if err != nil {
		return nil, fmt.Errorf("the kubelet's client certificate for %s: %w", user, err)
	}
	dns := []string{node.Name}
	if hostname != "" {
		dns = append(dns, hostname)
	}
	c.ServingCert, c.ServingKey, err = nodeCertificate(ctx, cs, subject, dns, []net.IP{ip}, certv1.KubeletServingSignerName,
		[]certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth})
	if err != nil {
		return nil, fmt.Errorf("the kubelet's serving certificate for %s: %w", user, err)
	}
	return c, nil
}

// nodeCertificate makes a key, asks signer for a certificate of subject (with the SANs), approves
// the request, waits for the certificate and deletes the request: the key and certificate, PEM.
func nodeCertificate(ctx context.Context, cs kubernetes.Interface, subject *pkix.Name, dns []string, ips []net.IP, signer string, usages []certv1.KeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := certutil.MakeCSR(key, subject, dns, ips)
	if err != nil {
		return nil, nil, err
	}
	name, uid, err := csr.RequestCertificateWithContext(ctx, cs, der, "", signer, nil, usages, key)
	if err != nil {
		return nil, nil, err
	}
	defer cs.CertificatesV1().CertificateSigningRequests().Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	req, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	req.Status.Conditions = append(req.Status.Conditions, certv1.CertificateSigningRequestCondition{Type: certv1.CertificateApproved,
		Status: corev1.ConditionTrue, Reason: "HaleNodeJoin", Message: "hale approved the request it made for its node " + subject.CommonName})
	if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, req, metav1.UpdateOptions{}); err != nil {
		return nil, nil, fmt.Errorf("approving %s: %w", name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, certWait)
	defer cancel()
	certPEM, err = csr.WaitForCertificate(wctx, cs, name, uid)
	if err != nil {
		return nil, nil, fmt.Errorf("%s was approved, but the cluster's signer issued no certificate within %s (does its controller manager sign, --cluster-signing-cert-file?): %w", name, certWait, err)
	}
	if keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}
