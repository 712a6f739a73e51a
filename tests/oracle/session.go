package main

// One KAI scheduling session on a cluster, as KAI's snapshot tool runs it: the objects go
// into fake clients, KAI's cache lists them through informers, a session opens with the
// given plugins, the actions run, and the outcome is read back (binds from the
// BindRequests the commit created, everything else from the session's pods).

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	kaifake "github.com/NVIDIA/KAI-scheduler/pkg/apis/client/clientset/versioned/fake"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/common_info"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/pod_info"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/pod_status"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/podgroup_info"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/cache"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/framework"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/plugins/snapshot"
)

// KAI keeps one plugin HTTP server for the process, made with the first session's mux;
// every session must hand it the same one.
var pluginMux = http.NewServeMux()

// podOutcome and outcome are the JSON of `kai-ray schedule -o json` (DESIGN.md 5.3).
type podOutcome struct {
	Status    string   `json:"status"`
	Node      *string  `json:"node"`
	GPUGroups []string `json:"gpuGroups"`
	Reason    string   `json:"reason,omitempty"`
}

type groupOutcome struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
}

type queueOutcome struct {
	FairShare map[string]float64 `json:"fairShare"`
	Allocated map[string]float64 `json:"allocated"`
}

type outcome struct {
	Pods      map[string]podOutcome   `json:"pods"`
	PodGroups map[string]groupOutcome `json:"podGroups"`
	Queues    map[string]queueOutcome `json:"queues"`
}

// copyObjects deep-copies what a session may change (shifted times, statuses).
func copyObjects(raw *snapshot.RawKubernetesObjects) *snapshot.RawKubernetesObjects {
	out := *raw
	out.Pods = make([]*v1.Pod, len(raw.Pods))
	for i, pod := range raw.Pods {
		out.Pods[i] = pod.DeepCopy()
	}
	out.Nodes = make([]*v1.Node, len(raw.Nodes))
	for i, node := range raw.Nodes {
		out.Nodes[i] = node.DeepCopy()
	}
	out.Queues = append(out.Queues[:0:0], raw.Queues...)
	for i, queue := range raw.Queues {
		out.Queues[i] = queue.DeepCopy()
	}
	out.PodGroups = append(out.PodGroups[:0:0], raw.PodGroups...)
	for i, podGroup := range raw.PodGroups {
		out.PodGroups[i] = podGroup.DeepCopy()
	}
	return &out
}

func createAll(raw *snapshot.RawKubernetesObjects) (*fake.Clientset, *kaifake.Clientset, error) {
	kube := fake.NewSimpleClientset()
	kai := kaifake.NewSimpleClientset()
	ctx := context.Background()
	create := metav1.CreateOptions{}
	var errs []string
	note := func(kind, name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s %s: %v", kind, name, err))
		}
	}
	for _, node := range raw.Nodes {
		_, err := kube.CoreV1().Nodes().Create(ctx, node, create)
		note("Node", node.Name, err)
	}
	for _, pod := range raw.Pods {
		_, err := kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, create)
		note("Pod", pod.Namespace+"/"+pod.Name, err)
	}
	for _, class := range raw.PriorityClasses {
		_, err := kube.SchedulingV1().PriorityClasses().Create(ctx, class, create)
		note("PriorityClass", class.Name, err)
	}
	for _, configMap := range raw.ConfigMaps {
		_, err := kube.CoreV1().ConfigMaps(configMap.Namespace).Create(ctx, configMap, create)
		note("ConfigMap", configMap.Name, err)
	}
	for _, queue := range raw.Queues {
		_, err := kai.SchedulingV2().Queues(queue.Namespace).Create(ctx, queue, create)
		note("Queue", queue.Name, err)
	}
	for _, podGroup := range raw.PodGroups {
		_, err := kai.SchedulingV2alpha2().PodGroups(podGroup.Namespace).Create(ctx, podGroup, create)
		note("PodGroup", podGroup.Namespace+"/"+podGroup.Name, err)
	}
	for _, request := range raw.BindRequests {
		_, err := kai.SchedulingV1alpha2().BindRequests(request.Namespace).Create(ctx, request, create)
		note("BindRequest", request.Namespace+"/"+request.Name, err)
	}
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return kube, kai, nil
}

// session is one open KAI session and what it needs to be closed.
type session struct {
	ssn     *framework.Session
	cache   cache.Cache
	kai     *kaifake.Clientset
	stop    chan struct{}
	mutex   sync.Mutex
	deleted map[string]bool // pods KAI deleted (evicted) through the API
}

func openSession(raw *snapshot.RawKubernetesObjects, setup *kaiSetup) (*session, error) {
	kube, kai, err := createAll(raw)
	if err != nil {
		return nil, err
	}
	params := setup.Params
	schedulerCache := cache.New(&cache.SchedulerCacheParams{
		KubeClient:                  kube,
		KAISchedulerClient:          kai,
		SchedulerName:               params.SchedulerName,
		NodePoolParams:              params.PartitionParams,
		RestrictNodeScheduling:      params.RestrictSchedulingNodes,
		DetailedFitErrors:           params.DetailedFitErrors,
		ScheduleCSIStorage:          params.ScheduleCSIStorage,
		FullHierarchyFairness:       params.FullHierarchyFairness,
		AllowConsolidatingReclaim:   params.AllowConsolidatingReclaim,
		NumOfStatusRecordingWorkers: max(params.NumOfStatusRecordingWorkers, 1),
		DiscoveryClient:             kube.Discovery(),
	})
	if schedulerCache == nil {
		return nil, fmt.Errorf("KAI's cache could not be created")
	}
	stop := make(chan struct{})
	schedulerCache.Run(stop)
	schedulerCache.WaitForCacheSync(stop)
	ssn, err := framework.OpenSession(schedulerCache, setup.Config, params, "oracle", pluginMux)
	if err != nil {
		close(stop)
		return nil, err
	}
	s := &session{ssn: ssn, cache: schedulerCache, kai: kai, stop: stop, deleted: map[string]bool{}}
	// Evictions are pod deletions, sent from KAI's worker goroutines; each is recorded here and
	// then carried out by the fake client as usual.
	kube.PrependReactor("delete", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		deletion := action.(k8stesting.DeleteAction)
		s.mutex.Lock()
		s.deleted[deletion.GetNamespace()+"/"+deletion.GetName()] = true
		s.mutex.Unlock()
		return false, nil, nil
	})
	return s, nil
}

func (s *session) close() {
	framework.CloseSession(s.ssn)
	s.cache.WaitForWorkers(s.stop)
	close(s.stop)
}

// run executes the actions and reads the outcome for every pod of raw.
func (s *session) run(raw *snapshot.RawKubernetesObjects, actions []string) (*outcome, error) {
	for _, name := range actions {
		action, found := framework.GetAction(name)
		if !found {
			return nil, fmt.Errorf("KAI has no action %q", name)
		}
		action.Execute(s.ssn)
	}
	s.cache.WaitForWorkers(s.stop) // evictions are sent asynchronously
	return s.collect(raw)
}

// snapshotZip calls the snapshot plugin's /get-snapshot endpoint of this session.
func (s *session) snapshotZip() ([]byte, error) {
	recorder := httptest.NewRecorder()
	pluginMux.ServeHTTP(recorder, httptest.NewRequest(http.MethodGet, "/get-snapshot", nil))
	if recorder.Code != http.StatusOK {
		return nil, fmt.Errorf("/get-snapshot answered %d: %s", recorder.Code, recorder.Body.String())
	}
	return recorder.Body.Bytes(), nil
}

// kaiStatus says a session pod's status in kai-ray's vocabulary.
func kaiStatus(status pod_status.PodStatus) string {
	switch status {
	case pod_status.Pending, pod_status.Gated:
		return "Pending"
	case pod_status.Allocated, pod_status.Binding:
		return "Binding"
	case pod_status.Bound, pod_status.Running:
		return "Running"
	case pod_status.Pipelined:
		return "Pipelined"
	case pod_status.Releasing, pod_status.Deleted:
		return "Releasing"
	case pod_status.Succeeded:
		return "Succeeded"
	case pod_status.Failed:
		return "Failed"
	}
	return status.String()
}

// inputStatus is what kai-ray reports for a pod that is no task of any session job.
func inputStatus(pod *v1.Pod) (string, string) {
	switch {
	case pod.Status.Phase == v1.PodSucceeded:
		return "Succeeded", pod.Spec.NodeName
	case pod.Status.Phase == v1.PodFailed:
		return "Failed", pod.Spec.NodeName
	case pod.DeletionTimestamp != nil:
		return "Releasing", pod.Spec.NodeName
	case pod.Spec.NodeName != "":
		return "Running", pod.Spec.NodeName
	case pod.Status.NominatedNodeName != "":
		return "Pipelined", pod.Status.NominatedNodeName
	}
	return "Pending", ""
}

// inputGPUGroups is the shared GPUs a placed fractional pod sits on, from its labels.
func inputGPUGroups(pod *v1.Pod) []string {
	var groups []string
	if group := pod.Labels["runai-gpu-group"]; group != "" {
		groups = append(groups, group)
	}
	var more []string
	for key, value := range pod.Labels {
		if strings.HasPrefix(key, "runai-gpu-group/") && value != "" && value != pod.Labels["runai-gpu-group"] {
			more = append(more, value)
		}
	}
	sort.Strings(more)
	return append(groups, more...)
}

func nodePtr(name string) *string {
	if name == "" {
		return nil
	}
	return &name
}

func (s *session) collect(raw *snapshot.RawKubernetesObjects) (*outcome, error) {
	requests, err := s.kai.SchedulingV1alpha2().BindRequests("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	bound := map[string]int{}
	for i, request := range requests.Items {
		bound[request.Namespace+"/"+request.Spec.PodName] = i
	}
	tasks := map[string]*pod_info.PodInfo{}
	jobOf := map[string]*podgroup_info.PodGroupInfo{}
	for _, job := range s.ssn.PodGroupInfos {
		for _, task := range job.GetAllPodsMap() {
			key := task.Namespace + "/" + task.Name
			tasks[key] = task
			jobOf[key] = job
		}
	}
	result := &outcome{
		Pods:      map[string]podOutcome{},
		PodGroups: map[string]groupOutcome{},
		Queues:    map[string]queueOutcome{},
	}
	s.mutex.Lock()
	defer s.mutex.Unlock()
	for _, pod := range raw.Pods {
		key := pod.Namespace + "/" + pod.Name
		task, isTask := tasks[key]
		moved := isTask && task.Status == pod_status.Pipelined
		if s.deleted[key] && !moved {
			// Evicted (a moved pod is deleted too, and pipelined elsewhere): what the API saw
			// decides, whatever the session's copy of the pod says.
			_, node := inputStatus(pod)
			result.Pods[key] = podOutcome{Status: "Releasing", Node: nodePtr(node),
				GPUGroups: append([]string{}, inputGPUGroups(pod)...)}
			continue
		}
		if !isTask {
			status, node := inputStatus(pod)
			out := podOutcome{Status: status, Node: nodePtr(node), GPUGroups: []string{}}
			if status == "Pending" {
				out.Reason = "not a task of any scheduling job"
			}
			result.Pods[key] = out
			continue
		}
		out := podOutcome{Status: kaiStatus(task.Status), Node: nodePtr(task.NodeName),
			GPUGroups: append([]string{}, task.GPUGroups...)}
		if index, found := bound[key]; found && task.Status == pod_status.Binding {
			request := requests.Items[index]
			if request.Spec.SelectedNode != task.NodeName {
				return nil, fmt.Errorf("pod %s: BindRequest names node %s, the session %s",
					key, request.Spec.SelectedNode, task.NodeName)
			}
			out.Node = nodePtr(request.Spec.SelectedNode)
			out.GPUGroups = append([]string{}, request.Spec.SelectedGPUGroups...)
		} else if task.Status == pod_status.Binding {
			return nil, fmt.Errorf("pod %s: binding without a BindRequest", key)
		}
		if out.Status == "Pending" {
			out.Node = nil
			out.Reason = pendingReason(jobOf[key], task)
		}
		if out.Status == "Releasing" && pod.DeletionTimestamp == nil {
			// Evicted in the session's books but never deleted: the pod was not touched.
			out.Status, out.Node = "Running", nodePtr(pod.Spec.NodeName)
		}
		result.Pods[key] = out
	}
	for _, job := range s.ssn.PodGroupInfos {
		if job.PodGroup == nil {
			continue
		}
		result.PodGroups[job.NamespacedName] = groupOutcome{
			Status: groupStatus(job),
			Reason: common_info.JobFitErrorsToMessage(job.JobFitErrors),
		}
	}
	for _, queue := range s.ssn.Queues {
		share := s.ssn.QueueFairShare(queue)
		allocated := s.ssn.QueueAllocatedResources(queue)
		entry := queueOutcome{FairShare: map[string]float64{}, Allocated: map[string]float64{}}
		if share != nil {
			entry.FairShare = map[string]float64{"gpu": share.GPUs(), "cpu": share.Cpu(), "memory": share.Memory()}
		}
		if allocated != nil {
			entry.Allocated = map[string]float64{
				"gpu": allocated.GPUs(), "cpu": allocated.Cpu(), "memory": allocated.Memory()}
		}
		result.Queues[queue.Name] = entry
	}
	return result, nil
}

func pendingReason(job *podgroup_info.PodGroupInfo, task *pod_info.PodInfo) string {
	var parts []string
	if message := common_info.JobFitErrorsToMessage(job.JobFitErrors); message != "" {
		parts = append(parts, message)
	}
	if fitErrors, found := job.TasksFitErrors[task.UID]; found && fitErrors != nil {
		parts = append(parts, fitErrors.Error())
	}
	if len(parts) == 0 {
		return "not scheduled in this session"
	}
	return strings.Join(parts, "; ")
}

// groupStatus sums a job up the way kai-ray's podGroups entry does.
func groupStatus(job *podgroup_info.PodGroupInfo) string {
	seen := map[string]bool{}
	var statuses []string
	for _, task := range job.GetAllPodsMap() {
		status := kaiStatus(task.Status)
		if !seen[status] {
			seen[status] = true
			statuses = append(statuses, status)
		}
	}
	sort.Strings(statuses)
	switch {
	case len(statuses) == 0:
		return "Pending"
	case seen["Pending"] && len(statuses) > 1 && job.IsGangSatisfied():
		return "Running"
	case seen["Pending"]:
		return "Pending"
	}
	for _, status := range []string{"Releasing", "Pipelined", "Binding", "Running"} {
		if seen[status] {
			return status
		}
	}
	return statuses[0]
}

// alignClock shifts the cluster so that KAI's wall clock, now, reads as the session's now.
func alignClock(raw *snapshot.RawKubernetesObjects, now *time.Time) {
	if now == nil {
		return
	}
	wall := time.Now().Truncate(time.Second)
	shiftTimes(raw, wall.Sub(now.Truncate(time.Second)))
}
