package main

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// update-kubeconfig adds the cluster's entries named by its ARN, keeps the file's other
// entries, makes the new context current, and says "Updated" when it writes it again.
func TestMergeKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kube", "config")
	mine := clientcmdapi.NewConfig()
	mine.Clusters["prod"] = &clientcmdapi.Cluster{Server: "https://prod.example:6443"}
	mine.AuthInfos["me"] = &clientcmdapi.AuthInfo{Token: "t"}
	mine.Contexts["prod"] = &clientcmdapi.Context{Cluster: "prod", AuthInfo: "me"}
	mine.CurrentContext = "prod"
	os.MkdirAll(filepath.Dir(path), 0o700)
	if err := clientcmd.WriteToFile(*mine, path); err != nil {
		t.Fatal(err)
	}
	given := clientcmdapi.NewConfig()
	given.Clusters["hale"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443", CertificateAuthorityData: []byte("ca")}
	given.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key")}
	given.Contexts["hale"] = &clientcmdapi.Context{Cluster: "hale", AuthInfo: "admin"}
	given.CurrentContext = "hale"
	const arn = "arn:aws:eks:us-west-2:123456789012:cluster/hale-local"
	for _, want := range []string{"Added new", "Updated"} {
		verb, err := mergeKubeconfig(path, given, arn, arn)
		if err != nil || verb != want {
			t.Fatalf("merge: %q %v, want %q", verb, err, want)
		}
	}
	got, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.CurrentContext != arn || got.Contexts["prod"] == nil || got.Clusters[arn].Server != "https://127.0.0.1:6443" ||
		string(got.AuthInfos[arn].ClientKeyData) != "key" || got.Contexts[arn].Cluster != arn {
		t.Errorf("merged kubeconfig: current %q, contexts %v, clusters %v", got.CurrentContext, got.Contexts, got.Clusters)
	}
}

func TestKubeconfigPath(t *testing.T) {
	t.Setenv("KUBECONFIG", "/a/one"+string(filepath.ListSeparator)+"/b/two")
	if p := kubeconfigPath(""); p != "/a/one" {
		t.Errorf("from $KUBECONFIG: %s", p)
	}
	if p := kubeconfigPath("/x"); p != "/x" {
		t.Errorf("from the flag: %s", p)
	}
	t.Setenv("KUBECONFIG", "")
	if p := kubeconfigPath(""); p != clientcmd.RecommendedHomeFile {
		t.Errorf("default: %s", p)
	}
}
