package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/provider/static"
	"github.com/haleproject/hale/internal/store"
)

// Endpoints of the static provider's host pool, behind `hale hosts list` and `hale hosts
// return`, and of kernel-log injection behind `hale debug inject-fault` for providers whose
// nodes are other machines.
const (
	// HostsPath: GET answers a HostList (needs sagemaker:ListClusterNodes).
	HostsPath = "/hale/hosts"
	// HostsReturnPath: POST a HostReturn; answers the host's HostStatus (needs
	// sagemaker:UpdateCluster).
	HostsReturnPath = "/hale/hosts/return"
	// KernelLogPath: POST a KernelLogInjection (needs sagemaker:UpdateCluster).
	KernelLogPath = "/hale/debug/kernel-log"
)

// HostList is every host of the pool: {"Hosts": [{"Address": …, "State": …, …}]}.
type HostList struct {
	Hosts []static.HostStatus `json:"Hosts"`
}

// HostReturn asks to put a Quarantined or Unreachable host back in the pool.
type HostReturn struct {
	Address string `json:"Address"`
}

// KernelLogInjection appends Lines to the kernel log of the node with InstanceId.
type KernelLogInjection struct {
	InstanceID string   `json:"InstanceId"`
	Lines      []string `json:"Lines"`
}

// pool is the provider's host pool, or a ValidationException when the provider has none.
func pool(p provider.Provider) (*static.Provider, error) {
	if sp, ok := p.(*static.Provider); ok {
		return sp, nil
	}
	name := provider.Kind("none")
	if p != nil {
		name = p.Name()
	}
	return nil, api.Errorf(api.CodeValidationException, "this server's provider is %s; only the static provider (hale server --provider static --hosts FILE) has a pool of hosts", name)
}

func (h *Handler) serveHosts(w http.ResponseWriter, r *http.Request, p provider.Provider) {
	var ans any
	err := func() error {
		key, body, err := h.verifiedBody(r)
		if err != nil {
			return err
		}
		sp, err := pool(p)
		if err != nil {
			return err
		}
		if r.Method == http.MethodGet {
			if !auth.Allows(key, "sagemaker:ListClusterNodes") {
				return auth.AccessDenied(key, "sagemaker:ListClusterNodes", "*")
			}
			ans = HostList{Hosts: sp.Hosts()}
			return nil
		}
		if !auth.Allows(key, "sagemaker:UpdateCluster") {
			return auth.AccessDenied(key, "sagemaker:UpdateCluster", "*")
		}
		var in HostReturn
		if err := json.Unmarshal(body, &in); err != nil || in.Address == "" {
			return api.Errorf(api.CodeValidationException, "Address: required (a host of the hosts file)")
		}
		hs, err := sp.Return(in.Address)
		switch {
		case errors.Is(err, provider.ErrNotFound):
			return api.Errorf(api.CodeResourceNotFound, "%v", err)
		case errors.Is(err, static.ErrHostInUse):
			return api.Errorf(api.CodeValidationException, "%v", err)
		}
		ans = hs
		return err
	}()
	writeJSON(w, h, ans, err)
}

func (h *Handler) serveKernelLog(w http.ResponseWriter, r *http.Request, p provider.Provider) {
	err := func() error {
		key, body, err := h.verifiedBody(r)
		if err != nil {
			return err
		}
		if !auth.Allows(key, "sagemaker:UpdateCluster") {
			return auth.AccessDenied(key, "sagemaker:UpdateCluster", "*")
		}
		inj, ok := p.(provider.KernelLogInjector)
		if !ok {
			return api.Errorf(api.CodeValidationException, "this server's provider cannot write to its nodes' kernel logs")
		}
		var in KernelLogInjection
		if err := json.Unmarshal(body, &in); err != nil || in.InstanceID == "" || len(in.Lines) == 0 {
			return api.Errorf(api.CodeValidationException, "InstanceId and Lines: required")
		}
		err = inj.InjectKernelLog(r.Context(), in.InstanceID, in.Lines)
		if errors.Is(err, provider.ErrNotFound) {
			return api.Errorf(api.CodeResourceNotFound, "No instance %s", in.InstanceID)
		}
		return err
	}()
	writeJSON(w, h, struct{}{}, err)
}

// verifiedBody reads a request's body (at most 1 MiB) and verifies its SigV4 signature, which
// covers the body: hale's own endpoints, as the API's.
func (h *Handler) verifiedBody(r *http.Request) (*store.AccessKey, []byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, nil, err
	}
	key, err := h.cfg.Verifier.Verify(r, body)
	return key, body, err
}
