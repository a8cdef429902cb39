/* Preloaded into MPI ranks by the sanitizer lane (contrib/hier-sanitize):
 * dlclose does nothing, so the components Open MPI unloads at MPI_Finalize
 * (mca_coll_hier.so among them) are still mapped when LeakSanitizer walks
 * the stacks at exit, and their frames have names instead of
 * "<unknown module>". (Open MPI 5 has mca_base_component_disable_dlclose;
 * 4.1 has no such parameter.) */
__attribute__((visibility("default"))) int dlclose(void *handle);

int dlclose(void *handle)
{
    (void)handle;
    return 0;
}
