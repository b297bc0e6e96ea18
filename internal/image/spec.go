package image

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Suites are the Debian releases an image may be built from, with the Slurm each ships:
// bookworm 22.05, trixie 24.11 (topology/block), sid 26.05 (topology.yaml).
var Suites = []string{"bookworm", "trixie", "sid"}

// BasePackages are installed in every image, on top of mmdebstrap's "apt" variant (the
// Essential:yes set and apt, so a lifecycle script can apt-get install). Each is there because
// a node runs it today:
//   - slurmd, slurmctld, slurm-client: the Slurm daemons the agent starts and the commands
//     (scontrol, srun, squeue, sinfo) the agent, hale srun and users run on nodes;
//   - slurmdbd, mariadb-server: accounting, run on each cluster's controller node
//     (internal/orchestrator/slurm/accounting.go);
//   - munge: Slurm's authentication (munged in every node);
//   - python3: HyperPod's and hale's lifecycle scripts (lifecycle_script.py);
//   - iproute2, procps, hostname: ip, ps/pkill and hostname -I, used by the lifecycle scripts,
//     hale's node set-up and people debugging a node (hostname is no longer Essential in trixie).
var BasePackages = []string{"hostname", "iproute2", "mariadb-server", "munge", "procps", "python3",
	"slurm-client", "slurmctld", "slurmd", "slurmdbd"}

// TorchPackage is PyTorch from Debian's archive (CPU build, gloo), which the example training
// job (examples/train) and auto-resume's demo run. It is in an image unless the spec sets
// NoPyTorch: see docs/images.md for its cost (it more than doubles an image).
const TorchPackage = "python3-torch"

// BLASPackage comes with TorchPackage: OpenBLAS, single-threaded. Debian's PyTorch calls
// whichever libblas.so.3 the alternatives system names, and with nothing else installed that
// is the reference BLAS (libblas3), a plain loop: a profile of the test suite found
// examples/train spending its CPU in the reference sgemm_. OpenBLAS installs itself as the
// alternative with a higher priority. The serial build keeps no threads that spin between
// calls, which would take CPUs from a node's other processes; PyTorch runs its own threads.
const BLASPackage = "libopenblas0-serial"

// Spec is what an image is built from: `hale image build` flags, or the JSON file of
// --from-file with the same member names.
type Spec struct {
	// Name is a person's name for the image, unique among a server's images: 3 to 128
	// characters of letters, digits, ( ) [ ] space . / - ' @ _ (EC2's AMI name rule).
	Name string `json:"Name"`
	// Suite is the Debian release: bookworm, trixie or sid.
	Suite string `json:"Suite"`
	// Packages are Debian packages installed besides BasePackages (and PyTorch).
	Packages []string `json:"Packages,omitempty"`
	// NoPyTorch leaves python3-torch (and its hundreds of MB) and OpenBLAS out.
	NoPyTorch bool `json:"NoPyTorch,omitempty"`
	// Container marks the root of a container image (PyTorchSpec), not a node's: it gets
	// Packages (and PyTorch) without BasePackages, since a pod runs no Slurm daemon. Not a
	// member of `hale image build`'s spec.
	Container bool `json:"-"`
}

var (
	namePattern    = regexp.MustCompile(`^[A-Za-z0-9()\[\] ./'@_-]{3,128}$`)
	packagePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`) // Debian Policy 5.6.1, Package
)

// ReadSpec reads a JSON Spec from path; unknown members are an error, so a misspelt one is
// not silently ignored.
func ReadSpec(path string) (Spec, error) {
	var s Spec
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("%s: %w (members: Name, Suite, Packages, NoPyTorch)", path, err)
	}
	return s, nil
}

// Validate checks s and returns every fault in one error.
func (s Spec) Validate() error {
	var faults []string
	if !namePattern.MatchString(s.Name) {
		faults = append(faults, fmt.Sprintf("Name %q: 3 to 128 letters, digits, spaces and ( ) [ ] . / - ' @ _", s.Name))
	}
	if !slices.Contains(Suites, s.Suite) {
		faults = append(faults, fmt.Sprintf("Suite %q: one of %s", s.Suite, strings.Join(Suites, ", ")))
	}
	for _, p := range s.Packages {
		if !packagePattern.MatchString(p) {
			faults = append(faults, fmt.Sprintf("package %q is not a Debian package name (lowercase letters, digits, + - .)", p))
		}
	}
	if len(faults) > 0 {
		return fmt.Errorf("image spec: %s", strings.Join(faults, "; "))
	}
	return nil
}

// AllPackages is every package the spec asks for (BasePackages, PyTorch unless NoPyTorch, and
// Packages), sorted and without repeats: what mmdebstrap --include gets.
func (s Spec) AllPackages() []string {
	all := slices.Clone(BasePackages)
	if s.Container {
		all = nil
	}
	if !s.NoPyTorch {
		all = append(all, TorchPackage, BLASPackage)
	}
	all = append(all, s.Packages...)
	slices.Sort(all)
	return slices.Compact(all)
}

// recipeVersion changes when the way hale builds an image changes (mmdebstrap's variant,
// options, hooks), so that roots cached by an older recipe are not reused.
const recipeVersion = 1

// Key identifies what a build produces, apart from the archive's state: the suite, the
// packages, the mirror and hale's recipe, not the name. Two specs with one Key built from one
// state of the archive install the same package versions.
func (s Spec) Key(mirror string) string {
	h := sha256.New()
	fmt.Fprintf(h, "recipe %d\nsuite %s\nmirror %s\n", recipeVersion, s.Suite, mirror)
	if s.Container {
		fmt.Fprintln(h, "container")
	}
	for _, p := range s.AllPackages() {
		fmt.Fprintf(h, "package %s\n", p)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
