package eks

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/haleproject/hale/internal/store"
)

// Job auto-resume on Kubernetes (research hyperpod-eks-health.md §1.5): a PyTorchJob annotated
// sagemaker.amazonaws.com/enable-job-auto-resume: "true" that has a pod on a node hale takes out
// of service for a repair is brought down and restarted: its pods are deleted, the training
// operator makes them again, and the scheduler places them on Schedulable nodes (Pending until
// there are some). At most job-max-retry-count times (default 1), counted in an annotation of
// hale's on the job; each restart, and a refusal, is an event on the job. A job whose pods fail
// on healthy nodes is the application's failure: hale does not touch it.
const (
	AnnotationAutoResume  = "sagemaker.amazonaws.com/enable-job-auto-resume"
	AnnotationMaxRetry    = "sagemaker.amazonaws.com/job-max-retry-count"
	AnnotationResumeCount = "sagemaker.amazonaws.com/job-auto-resume-count" // hale's: restarts so far
	// labelJobName is the label the training operator puts on a job's pods.
	labelJobName = "training.kubeflow.org/job-name"
)

// PyTorchJobs is the resource of Kubeflow's PyTorchJob (kubeflow.org/v1).
var PyTorchJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}

// resumeJobs restarts the auto-resume PyTorchJobs that have pods on node (about to be drained
// for why, by repair repairID), before the drain evicts them.
func (o *EKS) resumeJobs(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, clusterID, repairID, node, why string) {
	if dyn == nil {
		return
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, p := range pods.Items {
		job := p.Labels[labelJobName]
		if job == "" || seen[p.Namespace+"/"+job] {
			continue
		}
		seen[p.Namespace+"/"+job] = true
		pj, err := dyn.Resource(PyTorchJobs).Namespace(p.Namespace).Get(ctx, job, metav1.GetOptions{})
		if err != nil || pj.GetAnnotations()[AnnotationAutoResume] != "true" {
			continue
		}
		o.resumeJob(ctx, cs, dyn, pj, clusterID, repairID, node, why)
	}
}

func (o *EKS) resumeJob(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, pj *unstructured.Unstructured, clusterID, repairID, node, why string) {
	ann := pj.GetAnnotations()
	max := 1
	if v, err := strconv.Atoi(ann[AnnotationMaxRetry]); err == nil && v >= 0 {
		max = v
	}
	done, _ := strconv.Atoi(ann[AnnotationResumeCount])
	if done >= max {
		o.jobEvent(ctx, cs, pj, corev1.EventTypeWarning, "AutoResumeExhausted",
			fmt.Sprintf("node %s is %s; hale does not restart the job again: it was restarted %d time(s), its %s is %d (the drain still evicts its pod from the node, which the training operator handles under the job's restartPolicy)", node, why, done, AnnotationMaxRetry, max))
		return
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, AnnotationResumeCount, strconv.Itoa(done+1))
	if _, err := dyn.Resource(PyTorchJobs).Namespace(pj.GetNamespace()).Patch(ctx, pj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		o.log.Warn("auto-resume: counting a restart", "job", pj.GetName(), "error", err)
		return
	}
	pods, err := cs.CoreV1().Pods(pj.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: labelJobName + "=" + pj.GetName()})
	if err != nil {
		o.log.Warn("auto-resume: the job's pods", "job", pj.GetName(), "error", err)
		return
	}
	restarted := time.Now()
	for _, p := range pods.Items {
		cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}
	o.jobEvent(ctx, cs, pj, corev1.EventTypeNormal, "AutoResume",
		fmt.Sprintf("node %s is %s: the job's pods are restarted on healthy nodes (restart %d of %d)", node, why, done+1, max))
	// The repair waits for the job (store.Repair.ResumeJobs) until its pods run again.
	job := pj.GetNamespace() + "/" + pj.GetName()
	err = o.h.Store().Write(ctx, func(tx store.Tx) error {
		rp, err := tx.Repair(repairID)
		if err != nil || slices.Contains(rp.ResumeJobs, job) {
			return err
		}
		rp.ResumeJobs = append(rp.ResumeJobs, job)
		return tx.PutRepair(rp)
	})
	if err != nil {
		o.log.Warn("auto-resume: noting the job on its repair", "job", job, "repair", repairID, "error", err)
		return
	}
	go o.watchResumed(context.WithoutCancel(ctx), cs, clusterID, job, len(pods.Items), restarted)
}

// resumeWatchLimit bounds how long a restarted job is watched for its pods to run again.
const resumeWatchLimit = 30 * time.Minute

// watchResumed waits until the restarted job has its pods again (as many as it had, all made
// since the restart) and all Running, and reports it resumed (orchestrator.Host.JobResumed):
// the job is back, on the repair's timeline and in hale_repair_fault_to_job_resumed_seconds.
func (o *EKS) watchResumed(ctx context.Context, cs kubernetes.Interface, clusterID, job string, want int, restarted time.Time) {
	ctx, cancel := context.WithTimeout(ctx, resumeWatchLimit)
	defer cancel()
	ns, name, _ := strings.Cut(job, "/")
	for ctx.Err() == nil {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labelJobName + "=" + name})
		if err == nil && len(pods.Items) >= max(want, 1) && !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool {
			return p.Status.Phase != corev1.PodRunning || p.CreationTimestamp.Time.Before(restarted.Truncate(time.Second))
		}) {
			if err := o.h.JobResumed(ctx, clusterID, job); err != nil {
				o.log.Warn("auto-resume: reporting the job resumed", "job", job, "error", err)
			}
			return
		}
		o.h.Sleep(ctx, time.Second)
	}
	o.log.Warn("auto-resume: the restarted job's pods did not all run again", "job", job, "within", resumeWatchLimit)
}

// jobEvent records an event on the PyTorchJob, as kubectl describe shows it.
func (o *EKS) jobEvent(ctx context.Context, cs kubernetes.Interface, pj *unstructured.Unstructured, typ, reason, msg string) {
	now := metav1.NewTime(time.Now())
	_, err := cs.CoreV1().Events(pj.GetNamespace()).Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: pj.GetName() + ".", Namespace: pj.GetNamespace()},
		InvolvedObject: corev1.ObjectReference{APIVersion: "kubeflow.org/v1", Kind: "PyTorchJob", Name: pj.GetName(), Namespace: pj.GetNamespace(),
			UID: pj.GetUID()},
		Reason: reason, Message: msg, Type: typ, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source: corev1.EventSource{Component: "hale"}}, metav1.CreateOptions{})
	if err != nil {
		o.log.Warn("auto-resume: an event on the job", "job", pj.GetName(), "error", err)
	}
}
