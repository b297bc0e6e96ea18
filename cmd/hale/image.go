package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/haleproject/hale/internal/containerimage"
	"github.com/haleproject/hale/internal/image"
	"github.com/haleproject/hale/internal/server"
)

func newImageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Node images: root file systems built from Debian's archive, named by ImageId (ami-...)",
		Long: `Node images are root file systems that hale builds with mmdebstrap from Debian's packages
(bookworm: Slurm 22.05, trixie: Slurm 24.11, sid: Slurm 26.05), each with an id ami-<17 hex>
that instance groups name as their ImageId. The server builds and keeps them in
DATA_DIR/images; these commands ask it (docs/images.md).`,
	}
	cmd.AddCommand(newImageBuildCommand(), newImageListCommand(), newImageDescribeCommand(), newImageDeleteCommand(), newImageBuildDefaultCommand(),
		newImageBuildPyTorchCommand())
	return cmd
}

func newImageBuildCommand() *cobra.Command {
	var cf clientFlags
	var spec image.Spec
	var fromFile string
	var noWait bool
	cmd := &cobra.Command{
		Use:   "build --name NAME --suite bookworm|trixie|sid [--packages p1,p2] [--no-pytorch] | --from-file SPEC",
		Short: "Build a node image on the server and print its id",
		Long: `Build a root file system with mmdebstrap from Debian's archive: the suite's Slurm (slurmd,
slurmctld, slurm-client, slurmdbd), munge, MariaDB (accounting on controllers), python3,
iproute2, procps, PyTorch (python3-torch; --no-pytorch leaves its 1.1 GB out) and --packages.
The server records a manifest (every package's version, size, content hash) and prints the
build's progress here until the image is Available. A second build of the same packages from
the same state of the archive copies the first image's root.

--from-file takes a JSON spec with the same members: {"Name": "slurm-24.11", "Suite": "trixie",
"Packages": ["vim"], "NoPyTorch": false}; flags given as well override it.`,
		Example: `  hale image build --name slurm-24.11 --suite trixie
  hale image build --name small --suite bookworm --no-pytorch --packages vim,curl
  hale image build --from-file image.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s := spec
			if fromFile != "" {
				var err error
				if s, err = image.ReadSpec(fromFile); err != nil {
					return &exitError{Code: 252, Err: err} // a bad parameter, as the AWS CLI exits for one
				}
				f := cmd.Flags()
				if f.Changed("name") {
					s.Name = spec.Name
				}
				if f.Changed("suite") {
					s.Suite = spec.Suite
				}
				if f.Changed("packages") {
					s.Packages = spec.Packages
				}
				if f.Changed("no-pytorch") {
					s.NoPyTorch = spec.NoPyTorch
				}
			}
			if err := s.Validate(); err != nil {
				return &exitError{Code: 252, Err: err}
			}
			c, err := cf.client(cmd.Context())
			if err != nil {
				return &exitError{Code: 255, Err: err}
			}
			in, _ := json.Marshal(s)
			body, err := c.Post(cmd.Context(), server.ImagesPath, in)
			if err != nil {
				return &exitError{Code: 254, Err: err}
			}
			var m image.Manifest
			if err := json.Unmarshal(body, &m); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if noWait {
				fmt.Fprintf(out, "%s\t%s\t%s\n", m.ImageID, m.Name, m.Status)
				return nil
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "building %s (%s, %s); progress follows\n", m.ImageID, m.Name, m.Suite)
			next := 0
			for {
				q := url.Values{"log-from": {fmt.Sprint(next)}}
				body, err := c.Get(cmd.Context(), server.ImagePath+m.ImageID, q)
				if err != nil {
					return &exitError{Code: 254, Err: err}
				}
				var d server.ImageDescription
				if err := json.Unmarshal(body, &d); err != nil {
					return err
				}
				for _, l := range d.Log {
					fmt.Fprintln(cmd.ErrOrStderr(), "  "+l)
				}
				next = d.LogNext
				switch d.Image.Status {
				case image.StatusAvailable:
					fmt.Fprintf(out, "%s\t%s\t%s\tslurm %s\t%s\t%.1f s\n", m.ImageID, m.Name, d.Image.Status,
						cmp.Or(d.Image.Installed["slurmd"], "-"), image.HumanSize(d.Image.SizeBytes), d.Image.BuildSeconds)
					return nil
				case image.StatusBuilding:
				default:
					return &exitError{Code: 1, Err: fmt.Errorf("image %s is %s: %s", m.ImageID, d.Image.Status, d.Image.Reason)}
				}
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(time.Second):
				}
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.Name, "name", "", "the image's name, unique on the server")
	f.StringVar(&spec.Suite, "suite", "", "Debian release: "+strings.Join(image.Suites, ", "))
	f.StringSliceVar(&spec.Packages, "packages", nil, "more Debian packages, comma-separated")
	f.BoolVar(&spec.NoPyTorch, "no-pytorch", false, "leave PyTorch (python3-torch, about 1.1 GB) out")
	f.StringVar(&fromFile, "from-file", "", "a JSON spec (Name, Suite, Packages, NoPyTorch)")
	f.BoolVar(&noWait, "no-wait", false, "print the new image's id and return while it builds")
	cf.add(cmd)
	return cmd
}

func newImageBuildDefaultCommand() *cobra.Command {
	var dir, mirror string
	var rebuild bool
	cmd := &cobra.Command{
		Use:   "build-default [--dir DIR] [--rebuild]",
		Short: "Build hale's default image on this machine (scripts/setup.sh runs it; no server needed)",
		Long: `Build hale's default image: the root file system the nodes of instance groups with no
ImageId (or ImageId "default") boot from. Debian bookworm (Slurm 22.05) with Slurm's daemons,
munge, MariaDB and slurmdbd, python3, iproute2, procps and PyTorch, built with mmdebstrap in
DIR (` + image.DefaultDir + ` unless --dir says otherwise), which every hale server on the
machine uses (hale server --default-image). It runs here, as root, and prints its progress.
Already built: it says so and returns at once; --rebuild builds it again (nodes already running
keep the old root; new nodes get the new one).`,
		Example: `  sudo hale image build-default
  sudo hale image build-default --rebuild`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := image.BuildDefault(cmd.Context(), image.DefaultBuild{Dir: dir, Mirror: mirror, Rebuild: rebuild}, cmd.OutOrStdout())
			if err != nil {
				return &exitError{Code: 1, Err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "default image: %s (Debian %s, Slurm %s), %s, built in %.0f s\n", filepath.Join(dir, "rootfs"),
				m.Suite, cmp.Or(m.Installed["slurmd"], "-"), image.HumanSize(m.SizeBytes), m.BuildSeconds)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", image.DefaultDir, "where the default image is built (hale server --default-image takes the same directory)")
	f.StringVar(&mirror, "mirror", "", "the Debian archive (default "+image.DefaultMirror+")")
	f.BoolVar(&rebuild, "rebuild", false, "build it again even when it is built")
	return cmd
}

func newImageBuildPyTorchCommand() *cobra.Command {
	var dir, mirror string
	var rebuild bool
	cmd := &cobra.Command{
		Use:   "build-pytorch [--dir DIR] [--rebuild]",
		Short: "Build the PyTorch container image's root on this machine (scripts/setup.sh runs it; no server needed)",
		Long: `Build the root of the PyTorch container image that the pods of examples/eks run on Eks
nodes with real kubelets: Debian bookworm's PyTorch (CPU, gloo) and python3, nothing of a
node's, built with mmdebstrap in DIR (` + image.PyTorchDir + ` unless --dir says otherwise) with the
default image's package cache. A hale server whose Eks nodes run real kubelets pushes it into
its registry as ` + containerimage.PyTorchImage + ` (docs/kubernetes.md, "Images"). Already built:
it says so and returns at once; --rebuild builds it again.`,
		Example: `  sudo hale image build-pytorch`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := image.BuildDefault(cmd.Context(), image.DefaultBuild{Dir: dir, Mirror: mirror, Rebuild: rebuild, Spec: &image.PyTorchSpec,
				Builder: image.Mmdebstrap{CacheDir: filepath.Join(image.DefaultDir, "cache", "apt")}}, cmd.OutOrStdout())
			if err != nil {
				return &exitError{Code: 1, Err: err}
			}
			// The image's layer is written here once, not by each server that pushes it.
			l, err := containerimage.RootLayer(dir)
			if err != nil {
				return &exitError{Code: 1, Err: err}
			}
			size, _ := l.Size()
			fmt.Fprintf(cmd.OutOrStdout(), "PyTorch container image's layer: %s, %s\n", filepath.Join(dir, containerimage.LayerFile), image.HumanSize(size))
			fmt.Fprintf(cmd.OutOrStdout(), "PyTorch container image's root: %s (Debian %s, PyTorch %s), %s, built in %.0f s\n", filepath.Join(dir, "rootfs"),
				m.Suite, cmp.Or(m.Installed[image.TorchPackage], "-"), image.HumanSize(m.SizeBytes), m.BuildSeconds)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", image.PyTorchDir, "where the root is built (hale server --pytorch-image takes the same directory)")
	f.StringVar(&mirror, "mirror", "", "the Debian archive (default "+image.DefaultMirror+")")
	f.BoolVar(&rebuild, "rebuild", false, "build it again even when it is built")
	return cmd
}

func newImageListCommand() *cobra.Command {
	var cf clientFlags
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the server's node images: id, name, suite, Slurm version, status, size",
		Example: `  hale image list
  hale image list --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.Context())
			if err != nil {
				return &exitError{Code: 255, Err: err}
			}
			body, err := c.Get(cmd.Context(), server.ImagesPath, nil)
			if err != nil {
				return &exitError{Code: 254, Err: err}
			}
			if output == "json" {
				fmt.Fprintln(cmd.OutOrStdout(), string(body))
				return nil
			}
			var list server.ImageList
			if err := json.Unmarshal(body, &list); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "IMAGE ID\tNAME\tSUITE\tSLURM\tSTATUS\tSIZE\tCREATED")
			for _, m := range list.Images {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ImageID, m.Name, m.Suite, cmp.Or(m.Installed["slurmd"], "-"),
					m.Status, image.HumanSize(m.SizeBytes), m.CreatedAt.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&output, "output", "table", "table or json")
	cf.add(cmd)
	return cmd
}

func newImageDescribeCommand() *cobra.Command {
	var cf clientFlags
	var log bool
	cmd := &cobra.Command{
		Use:   "describe IMAGE_ID",
		Short: "Print an image's manifest (JSON): packages and versions, size, content hash, status",
		Example: `  hale image describe ami-0123456789abcdef0
  hale image describe ami-0123456789abcdef0 --log`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.Context())
			if err != nil {
				return &exitError{Code: 255, Err: err}
			}
			var q url.Values
			if log {
				q = url.Values{"log-from": {"0"}}
			}
			body, err := c.Get(cmd.Context(), server.ImagePath+args[0], q)
			if err != nil {
				return &exitError{Code: 254, Err: err}
			}
			var d server.ImageDescription
			if err := json.Unmarshal(body, &d); err != nil {
				return err
			}
			if log {
				for _, l := range d.Log {
					fmt.Fprintln(cmd.OutOrStdout(), l)
				}
				return nil
			}
			b, _ := json.MarshalIndent(d.Image, "", "  ")
			fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return nil
		},
	}
	cmd.Flags().BoolVar(&log, "log", false, "print the image's build log instead")
	cf.add(cmd)
	return cmd
}

func newImageDeleteCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "delete IMAGE_ID",
		Short: "Delete an image no instance group uses",
		Long: `Delete an image's root file system and manifest. An image that an instance group of any
cluster uses (its ImageId, current or desired image) is refused with ResourceInUse, naming the
groups.`,
		Example: `  hale image delete ami-0123456789abcdef0`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(cmd.Context())
			if err != nil {
				return &exitError{Code: 255, Err: err}
			}
			in, _ := json.Marshal(server.ImageDelete{ImageID: args[0]})
			if _, err := c.Post(cmd.Context(), server.ImagesDeletePath, in); err != nil {
				return &exitError{Code: 254, Err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s deleted\n", args[0])
			return nil
		},
	}
	cf.add(cmd)
	return cmd
}
