import { createApp } from "vue";
import App from "./App.vue";
import "./styles.css";
import "highlight.js/styles/github.css";

createApp(App).mount("#app");
