package main

// Reading a cluster: the Kubernetes List (or multi-document stream) that
// `kai-ray schedule --snapshot` reads, or the ZIP that KAI's /get-snapshot returns.

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	schedulingv1alpha2 "github.com/NVIDIA/KAI-scheduler/pkg/apis/scheduling/v1alpha2"
	enginev2 "github.com/NVIDIA/KAI-scheduler/pkg/apis/scheduling/v2"
	enginev2alpha2 "github.com/NVIDIA/KAI-scheduler/pkg/apis/scheduling/v2alpha2"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/plugins/snapshot"
)

// The annotations KAI reads as times; they move with the clock like the object timestamps.
var timeAnnotations = []string{
	"kai.scheduler/stale-podgroup-timestamp",
	"kai.scheduler/last-start-timestamp",
}

// decodeList turns a List or a stream of documents (YAML or JSON) into KAI's raw objects.
// Kinds KAI's scheduler does not read are skipped, as kai-ray skips them.
func decodeList(data []byte) (*snapshot.RawKubernetesObjects, error) {
	raw := emptyRawObjects()
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for index := 0; ; index++ {
		var doc map[string]json.RawMessage
		if err := decoder.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return raw, nil
			}
			return nil, fmt.Errorf("document %d: %v", index, err)
		}
		if doc == nil {
			continue
		}
		if err := addObject(raw, doc, fmt.Sprintf("document %d", index)); err != nil {
			return nil, err
		}
	}
}

func emptyRawObjects() *snapshot.RawKubernetesObjects {
	return &snapshot.RawKubernetesObjects{}
}

func addObject(raw *snapshot.RawKubernetesObjects, doc map[string]json.RawMessage, where string) error {
	var kind, apiVersion string
	_ = json.Unmarshal(doc["kind"], &kind)
	_ = json.Unmarshal(doc["apiVersion"], &apiVersion)
	if kind == "List" || strings.HasSuffix(kind, "List") && doc["items"] != nil {
		var items []map[string]json.RawMessage
		if err := json.Unmarshal(doc["items"], &items); err != nil {
			return fmt.Errorf("%s: items: %v", where, err)
		}
		for i, item := range items {
			if err := addObject(raw, item, fmt.Sprintf("%s item %d", where, i)); err != nil {
				return err
			}
		}
		return nil
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	group := ""
	if slash := strings.Index(apiVersion, "/"); slash >= 0 {
		group = apiVersion[:slash]
	}
	into := func(target any) error {
		if err := json.Unmarshal(body, target); err != nil {
			return fmt.Errorf("%s (%s): %v", where, kind, err)
		}
		return nil
	}
	switch {
	case kind == "Node" && group == "":
		node := &v1.Node{}
		if err := into(node); err != nil {
			return err
		}
		defaultUID(&node.ObjectMeta)
		raw.Nodes = append(raw.Nodes, node)
	case kind == "Pod" && group == "":
		pod := &v1.Pod{}
		if err := into(pod); err != nil {
			return err
		}
		if pod.Namespace == "" {
			pod.Namespace = "default"
		}
		defaultUID(&pod.ObjectMeta)
		if pod.Status.Phase == "" { // the API server's default
			pod.Status.Phase = v1.PodPending
		}
		raw.Pods = append(raw.Pods, pod)
	case kind == "Queue" && group == "scheduling.run.ai":
		queue := &enginev2.Queue{}
		if err := into(queue); err != nil {
			return err
		}
		defaultUID(&queue.ObjectMeta)
		raw.Queues = append(raw.Queues, queue)
	case kind == "PodGroup" && group == "scheduling.run.ai":
		podGroup := &enginev2alpha2.PodGroup{}
		if err := into(podGroup); err != nil {
			return err
		}
		if podGroup.Namespace == "" {
			podGroup.Namespace = "default"
		}
		defaultUID(&podGroup.ObjectMeta)
		raw.PodGroups = append(raw.PodGroups, podGroup)
	case kind == "BindRequest" && group == "scheduling.run.ai":
		request := &schedulingv1alpha2.BindRequest{}
		if err := into(request); err != nil {
			return err
		}
		raw.BindRequests = append(raw.BindRequests, request)
	case kind == "PriorityClass" && group == "scheduling.k8s.io":
		class := &schedulingv1.PriorityClass{}
		if err := into(class); err != nil {
			return err
		}
		raw.PriorityClasses = append(raw.PriorityClasses, class)
	case kind == "ConfigMap" && group == "":
		configMap := &v1.ConfigMap{}
		if err := into(configMap); err != nil {
			return err
		}
		raw.ConfigMaps = append(raw.ConfigMaps, configMap)
	}
	return nil
}

// defaultUID gives an object without a UID its key as UID. KAI tells pods apart by UID and
// breaks ties by it; kai-ray breaks the same ties by name when there is no UID, and the
// key sorts as the name does.
func defaultUID(meta *metav1.ObjectMeta) {
	if meta.UID != "" {
		return
	}
	if meta.Namespace != "" {
		meta.UID = types.UID(meta.Namespace + "/" + meta.Name)
	} else {
		meta.UID = types.UID(meta.Name)
	}
}

// readZip reads the snapshot.json entry of a /get-snapshot ZIP.
func readZip(data []byte) (*snapshot.Snapshot, error) {
	archive, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	for _, file := range archive.File {
		if file.Name != snapshot.SnapshotFileName {
			continue
		}
		reader, err := file.Open()
		if err != nil {
			return nil, err
		}
		defer reader.Close()
		var snap snapshot.Snapshot
		if err := json.NewDecoder(reader).Decode(&snap); err != nil {
			return nil, fmt.Errorf("%s: %v", snapshot.SnapshotFileName, err)
		}
		if snap.RawObjects == nil {
			snap.RawObjects = emptyRawObjects()
		}
		return &snap, nil
	}
	return nil, fmt.Errorf("no %s in the ZIP", snapshot.SnapshotFileName)
}

func isZip(data []byte) bool {
	return len(data) > 4 && bytes.Equal(data[:4], []byte("PK\x03\x04"))
}

// shiftTimes moves every time KAI compares with its clock by delta. KAI reads the wall
// clock (time.Now) for staleness and minimum runtime; moving the cluster instead of the
// clock lets a session run "at" any instant.
func shiftTimes(raw *snapshot.RawKubernetesObjects, delta time.Duration) {
	if delta == 0 {
		return
	}
	move := func(meta *metav1.ObjectMeta) {
		if !meta.CreationTimestamp.IsZero() {
			meta.CreationTimestamp = metav1.NewTime(meta.CreationTimestamp.Add(delta))
		}
		if meta.DeletionTimestamp != nil {
			moved := metav1.NewTime(meta.DeletionTimestamp.Add(delta))
			meta.DeletionTimestamp = &moved
		}
		for _, key := range timeAnnotations {
			if value, found := meta.Annotations[key]; found {
				if parsed, err := time.Parse(time.RFC3339, value); err == nil {
					meta.Annotations[key] = parsed.Add(delta).UTC().Format(time.RFC3339)
				}
			}
		}
	}
	for _, pod := range raw.Pods {
		move(&pod.ObjectMeta)
		if pod.Status.StartTime != nil {
			moved := metav1.NewTime(pod.Status.StartTime.Add(delta))
			pod.Status.StartTime = &moved
		}
	}
	for _, podGroup := range raw.PodGroups {
		move(&podGroup.ObjectMeta)
	}
	for _, queue := range raw.Queues {
		move(&queue.ObjectMeta)
	}
	for _, node := range raw.Nodes {
		move(&node.ObjectMeta)
	}
}
