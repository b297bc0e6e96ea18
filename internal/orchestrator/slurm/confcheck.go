package slurm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
)

// A slurm.conf that does not parse stops every daemon that reads it, and no reboot or new
// machine cures that: it is a configuration fault, not a fault of the node (issue 27). So no
// rendering reaches a daemon before the cluster's own Slurm release has read it: syncFiles
// has it checked on the node it writes (whose Slurm is the one that will read it) before the
// write, and refuses it, with an Error event naming the line, when it does not parse.

// maxVerdicts bounds the remembered verdicts (renderings change a few times a day).
const maxVerdicts = 64

// verdict is what a node's Slurm said of one rendering: nil problems when it parsed; said,
// once its refusal's event is out.
type verdict struct {
	problems []slurmconf.Problem
	said     bool
}

// confKey names a slurm.conf by its content.
func confKey(conf string) string {
	sum := sha256.Sum256([]byte(conf))
	return hex.EncodeToString(sum[:8])
}

// checkConf has the Slurm on instanceID read conf (written to slurmconf.CandidatePath, beside
// the live file) as its daemons would. known is false when the node could give no verdict:
// no Slurm installed yet, or the check could not run; the caller then writes as before (no
// daemon of that node reads anything before Slurm is there). A verdict is kept per content,
// so each rendering is read once, on the first node it goes to.
func (s *Slurm) checkConf(ctx context.Context, instanceID, conf string) (problems []slurmconf.Problem, known bool, err error) {
	hash := confKey(conf)
	s.mu.Lock()
	v, ok := s.verdicts[hash]
	s.mu.Unlock()
	if ok {
		return v.problems, true, nil
	}
	r, err := s.h.Do(ctx, instanceID, &agentproto.Command{Id: fmt.Sprintf("slurm-candidate-%s-%d", hash, time.Now().UnixNano()), Ephemeral: true,
		Kind: &agentproto.Command_WriteFiles{WriteFiles: &agentproto.WriteFiles{Files: []*agentproto.File{
			{Path: slurmconf.CandidatePath, Content: []byte(conf), Mode: 0o644}}}}}, 15*time.Second)
	if err != nil {
		return nil, false, err
	}
	if r.Error != "" {
		return nil, false, fmt.Errorf("writing the candidate slurm.conf: %s", r.Error)
	}
	r, err = s.h.Do(ctx, instanceID, &agentproto.Command{Id: fmt.Sprintf("slurm-check-%s-%d", hash, time.Now().UnixNano()), Ephemeral: true,
		Kind: &agentproto.Command_Run{Run: &agentproto.RunCommand{Argv: slurmconf.CheckConf(slurmconf.CandidatePath), TimeoutSeconds: 30}}}, 35*time.Second)
	if err != nil {
		return nil, false, err
	}
	switch {
	case r.Error != "" || r.TimedOut || strings.Contains(string(r.StdoutTail), slurmconf.NoVerdict):
		return nil, false, nil // no verdict on the file
	case r.ExitCode != 0:
		problems = slurmconf.Problems(string(r.StdoutTail), conf)
		if len(problems) == 0 {
			problems = []slurmconf.Problem{{Message: "Slurm could not read it (no error printed)"}}
		}
	}
	s.mu.Lock()
	if len(s.verdicts) >= maxVerdicts {
		clear(s.verdicts)
	}
	s.verdicts[hash] = verdict{problems: problems}
	s.mu.Unlock()
	return problems, true, nil
}

// refuseEdits answers an operator's edits to slurm.conf on the controller that do not parse
// (SlurmConfigStrategy Merge would have merged them): the changed file is kept at
// slurmconf.RefusedPath, an Error event names each line Slurm refused (numbered as in the
// operator's file), and syncFiles then writes hale's last rendering back over it, so that no
// daemon, at a restart or a reconfigure, reads the broken file.
func (s *Slurm) refuseEdits(ctx context.Context, clusterID, instanceID, hash, live string, problems []slurmconf.Problem) error {
	if _, err := s.h.Run(ctx, instanceID, []string{"cp", "-p", slurmconf.ConfPath, slurmconf.RefusedPath}, 10*time.Second); err != nil {
		return err
	}
	liveLines := strings.Split(live, "\n")
	var said []string
	for _, p := range problems {
		p.Line = 0
		for i, l := range liveLines {
			if p.Text != "" && strings.TrimSpace(l) == p.Text {
				p.Line = i + 1
				break
			}
		}
		if p.Line == 0 && p.Text != "" {
			said = append(said, fmt.Sprintf("%s: %s (%s)", slurmconf.ConfPath, p.Message, p.Text))
			continue
		}
		said = append(said, slurmconf.ConfPath+" "+p.String())
	}
	return s.updateState(ctx, clusterID, "", func(tx store.Tx, cl *store.Cluster, st *State) (bool, error) {
		if st.Hash != hash {
			return false, nil
		}
		return false, s.h.Event(tx, cl, nil, api.ClusterEventLevelError, "slurm.conf: the changes made on the controller do not parse with the cluster's Slurm, so they are refused (SlurmConfigStrategy Merge): %s. "+
			"The daemons keep the configuration they run: hale writes its last slurm.conf back, and keeps the changed file at %s to fix and edit in again.", strings.Join(said, "; "), slurmconf.RefusedPath)
	})
}

// refuseRendering answers a rendering of hale's own (conf, which checkConf refused) that the
// cluster's Slurm does not parse (a setting from the cluster's spec Slurm refuses): it goes to
// no node, and the daemons keep the one they run. Said once per rendering (its verdict
// remembers); the caller's error keeps the node's files as they are.
func (s *Slurm) refuseRendering(ctx context.Context, clusterID, conf string, problems []slurmconf.Problem) error {
	hash := confKey(conf)
	s.mu.Lock()
	v := s.verdicts[hash]
	said := v.said
	v.said = true
	s.verdicts[hash] = v
	s.mu.Unlock()
	if !said {
		err := s.updateState(ctx, clusterID, "", func(tx store.Tx, cl *store.Cluster, st *State) (bool, error) {
			return false, s.h.Event(tx, cl, nil, api.ClusterEventLevelError, "slurm.conf: the configuration hale made from the cluster's spec does not parse with the cluster's Slurm: %s %s. "+
				"It is written to no node; the daemons keep the configuration they run.", slurmconf.ConfPath, slurmconf.Refusal(problems))
		})
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("slurm.conf %s does not parse: %s", hash, slurmconf.Refusal(problems))
}
